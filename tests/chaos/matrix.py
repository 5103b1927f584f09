"""The chaos matrix table: rows from every chaos test, printed at the end of the run.

A chaos test records one row (scenario, backend, outcome, time to resolution, usable
after) with :func:`record_row`. Rows travel in ``report.user_properties``, so they reach
the controller under pytest-xdist too; there ``pytest_terminal_summary`` prints them as a
table and writes it to ``.cache/chaos-matrix.txt``. Combinations that did not run show
why: ``n/a`` (the fault cannot be made real on that backend) or ``not run`` (deselected,
skipped, or failed before recording).

Registered from tests/conftest.py (``pytest_plugins``): the controller of an xdist run
started from the repository root never loads tests/chaos/conftest.py.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

ROW_KEY = "chaos_row"
CELL_KEY = "chaos_cell"
OUTPUT = Path(__file__).resolve().parents[2] / ".cache" / "chaos-matrix.txt"


@dataclass(frozen=True)
class Row:
    """One cell of the matrix."""

    scenario: str
    backend: str
    outcome: str
    """The fault turn's outcome(s), e.g. ``stuck`` or ``recovered``."""
    seconds: float | None
    """From the fault to the session at rest (virtual seconds on virtual backends)."""
    virtual: bool
    usable: bool | None
    """A follow-up prompt completed afterwards."""
    note: str = ""


def record_cell(node: pytest.Item, scenario: str, backend: str) -> None:
    """Say which cell the running test is about (so a failure shows up in the table)."""
    node.user_properties.append((CELL_KEY, json.dumps([scenario, backend])))


def record_row(node: pytest.Item, row: Row) -> None:
    """Attach ``row`` to the running test's report (before its assertions run)."""
    node.user_properties.append((ROW_KEY, json.dumps(asdict(row))))


_rows: dict[tuple[str, str], Row] = {}
_failed: set[tuple[str, str]] = set()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for key, value in report.user_properties:
        if key == ROW_KEY:
            row = Row(**json.loads(value))
            _rows[(row.scenario, row.backend)] = row
        elif key == CELL_KEY and report.failed:
            scenario, backend = json.loads(value)
            _failed.add((scenario, backend))


def _grid() -> list[tuple[str, ...]]:
    from tests.chaos.registry import BACKENDS, SCENARIOS

    by_cell = _rows
    failed_cells = _failed
    backends = [b for b in BACKENDS if any(r.backend == b for r in _rows.values())] or list(BACKENDS)
    lines: list[tuple[str, ...]] = [("SCENARIO", "BACKEND", "OUTCOME", "RESOLVED IN", "USABLE AFTER", "NOTE")]
    extra = sorted({scenario for scenario, _ in [*by_cell, *failed_cells] if scenario not in SCENARIOS})
    for scenario in [*SCENARIOS, *extra]:  # extra: a backend's own scenarios (copilot's stop-during-tool)
        for backend in BACKENDS:
            row = by_cell.get((scenario, backend))
            driver = BACKENDS[backend]
            if row is not None:
                unit = " (virtual)" if row.virtual else ""
                seconds = "-" if row.seconds is None else f"{row.seconds:.1f} s{unit}"
                usable = "-" if row.usable is None else ("yes" if row.usable else "NO")
                failed = (scenario, backend) in failed_cells
                lines.append(
                    (scenario, backend, row.outcome + (" (test FAILED)" if failed else ""), seconds, usable, row.note)
                )
            elif scenario in extra:
                continue
            elif scenario in driver.not_applicable:
                lines.append((scenario, backend, "n/a", "-", "-", driver.not_applicable[scenario]))
            elif backend in backends:
                state = "FAILED" if (scenario, backend) in failed_cells else "not run"
                lines.append((scenario, backend, state, "-", "-", ""))
    return lines


def format_table(lines: list[tuple[str, ...]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]) - 1)]
    out = []
    for line in lines:
        cells = "  ".join(
            cell.ljust(width) for cell, width in zip(line, widths, strict=False)
        )  # the last cell is not padded
        out.append(f"{cells}  {line[-1]}".rstrip())
    return "\n".join(out)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not (_rows or _failed):
        return
    table = format_table(_grid())
    terminalreporter.write_sep("=", f"chaos matrix ({len(_rows)} runs)")
    terminalreporter.write_line(table)
    try:
        OUTPUT.parent.mkdir(parents=True, exist_ok=True)
        OUTPUT.write_text(table + "\n", encoding="utf-8")
        terminalreporter.write_line(f"(written to {OUTPUT})")
    except OSError as exc:
        terminalreporter.write_line(f"(could not write {OUTPUT}: {exc})")
