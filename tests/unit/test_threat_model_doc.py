"""docs/threat-model.md names, for each defence, the test that holds it: every name must be a
test that exists, so a renamed or dropped test cannot leave a defence claimed and unproven."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "threat-model.md"
README = ROOT / "README.md"

# `tests/x/test_y.py::test_z`, then `::test_w` for more tests of the same file in that cell.
CELL_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)?::(test_\w+)`")


def named_tests(text: str) -> set[tuple[str, str]]:
    """(file, test) pairs the text names; a bare ``::test`` is of the file named before it."""
    pairs: set[tuple[str, str]] = set()
    for line in text.splitlines():
        current = ""
        for path, test in CELL_REFERENCE.findall(line):
            current = path or current
            assert current, f"{test} is named with no file before it: {line[:120]}"
            pairs.add((current, test))
    return pairs


def defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_test_the_threat_model_names_exists() -> None:
    pairs = named_tests(DOC.read_text())
    assert len(pairs) > 20  # the document names its tests this way; a format change must fail here
    missing = [f"{path}::{test}" for path, test in sorted(pairs) if test not in defined_tests(ROOT / path)]
    assert missing == []


def test_every_test_file_the_readme_threat_model_names_exists() -> None:
    section = README.read_text().split("### Threat model", 1)[1].split("\n### ", 1)[0]
    files = re.findall(r"`(test_\w+\.py)`", section)
    assert files, "the README's threat model names the test files that hold it"
    missing = [name for name in files if not list((ROOT / "tests").rglob(name))]
    assert missing == []
