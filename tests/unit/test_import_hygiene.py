"""domain/ never imports Textual, Rich, an SDK or another layer; the demo path never loads an SDK.

import-linter checks the import graph statically (``make test``); this checks it at run time.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import polypilot_tui

CORE = Path(polypilot_tui.__file__).parent / "domain"
FORBIDDEN = (
    "textual",
    "rich",
    "copilot",
    "acp",
    "polypilot_tui.ui",
    "polypilot_tui.agents",
    "polypilot_tui.engine",
    "polypilot_tui.storage",
    "polypilot_tui.infra",
    "polypilot_tui.config",
    "polypilot_tui.commands",
)


def test_core_modules_load_without_ui_or_sdk() -> None:
    modules = sorted(f"polypilot_tui.domain.{p.stem}" for p in CORE.glob("*.py") if p.stem != "__init__")
    assert len(modules) >= 10
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'copilot', 'acp') "
        f"or m.startswith({FORBIDDEN[4:]!r}))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"core pulled in: {out}"


def test_core_source_has_no_forbidden_imports() -> None:
    offenders = []
    for path in CORE.glob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")):
                target = stripped.split()[1]
                if target.startswith(FORBIDDEN) and "TYPE_CHECKING" not in line:
                    offenders.append(f"{path.name}:{number}: {stripped}")
    assert offenders == []


def test_demo_agent_needs_no_sdk() -> None:
    code = (
        "import sys\n"
        "from polypilot_tui.agents import create_backend\nimport polypilot_tui.agents.demo.backend\n"
        "import polypilot_tui.engine.manager\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('copilot', 'acp'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


FIRST_PARTY = ("polypilot_tui", "tests", "bench")


def test_no_module_imports_a_private_name_of_another() -> None:
    """``from x import _y`` couples to what x keeps the right to change (ruff's SLF001 sees only attributes)."""
    root = Path(polypilot_tui.__file__).parents[1]
    offenders = []
    for folder in ("polypilot_tui", "tests", "bench"):
        for path in (root / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FIRST_PARTY:
                    offenders += [
                        f"{path.relative_to(root)}:{node.lineno}: {alias.name}"
                        for alias in node.names
                        if alias.name.startswith("_")
                    ]
    assert offenders == []
