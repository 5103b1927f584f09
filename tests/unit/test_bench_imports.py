"""Every name a benchmark imports from this project exists.

`make bench` is not run by CI, and its modules import the project's test support inside their
``main()`` (to keep `python -m bench` light): a name renamed or removed there broke two
benchmarks unseen until the next full run. Every ``from X import a, b`` in bench/, at any depth,
is checked here without running anything."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
OURS = ("polypilot_tui", "tests", "bench")


def imports() -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = []
    for path in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(OURS) and not node.level:
                found += [(path.name, node.module, alias.name) for alias in node.names]
    return found


def exists(module: str, name: str) -> bool:
    """``from module import name`` works: an attribute, or a submodule of a package."""
    imported = importlib.import_module(module)
    if hasattr(imported, name):
        return True
    return hasattr(imported, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None


def test_each_name_a_benchmark_imports_from_the_project_exists() -> None:
    found = imports()
    assert any(module.startswith("tests.") for _, module, _ in found)  # the walk finds the nested ones
    missing = [f"bench/{where}: {module} has no {name}" for where, module, name in found if not exists(module, name)]
    assert not missing, missing
