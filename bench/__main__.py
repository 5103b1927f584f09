"""`make bench`: run every benchmark module in bench/ (or those named) and print one table.

Each module's ``main()`` prints its details and returns the rows it measured (see
:data:`bench._support.Row`). A full run writes the table, with the date and the machine, to
``bench/results.md`` and into the README's Performance section (between its markers), so
the README always shows a real run; a run of named modules only prints its table.
"""

from __future__ import annotations

import datetime
import importlib
import os
import pkgutil
import platform
import sys
import time
from pathlib import Path

from bench._support import Row

HERE = Path(__file__).parent
RESULTS = HERE / "results.md"
README = HERE.parent / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def machine() -> str:
    """The machine in one line: CPU model, cores, memory, OS, Python, load when the run began."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {mem_kib / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        memory = ""
    load = f", load {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
    return (
        f"{model or platform.machine()}, {os.cpu_count()} cores{memory}; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}{load} at the start"
    )


def table(rows: list[Row], failed: list[str], when: str, where: str, took: float) -> str:
    """The markdown table of a run, with when, where and what failed."""
    lines = [
        f"`make bench` on {when}, {where}; {took / 60:.1f} min in all.",
        "",
        "| path | measured | target |",
        "|---|---|---|",
    ]
    lines += [f"| {path} | {figure} | {target or '—'} |" for path, figure, target in rows]
    if failed:
        lines += ["", "Did not run: " + "; ".join(failed) + "."]
    return "\n".join(lines) + "\n"


def between_markers(path: Path, text: str) -> bool:
    """Put ``text`` between ``path``'s markers (False when they are missing): the rest of the
    file (the README around its table, results.md's notes and history) is kept."""
    content = path.read_text() if path.exists() else ""
    if START not in content or END not in content:
        return False
    head, rest = content.split(START, 1)
    path.write_text(f"{head}{START}\n{text}{END}{rest.split(END, 1)[1]}")
    return True


def main(argv: list[str]) -> int:
    names = argv or sorted(m.name for m in pkgutil.iter_modules([str(HERE)]) if not m.name.startswith("_"))
    where = machine()
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    began = time.perf_counter()
    rows: list[Row] = []
    failed: list[str] = []
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        if not hasattr(module, "main"):
            continue
        print(f"\n=== bench/{name}.py ===", flush=True)
        started = time.perf_counter()
        try:
            result = module.main()
        except Exception as exc:  # noqa: BLE001 - report and go on with the others
            failed.append(f"{name} ({type(exc).__name__}: {exc})")
            print(f"FAILED: {type(exc).__name__}: {exc}", flush=True)
        else:
            rows += result if isinstance(result, list) else []
        print(f"({time.perf_counter() - started:.1f} s)", flush=True)
    text = table(rows, failed, when, where, time.perf_counter() - began)
    print("\n" + text)
    if not argv:
        if not between_markers(RESULTS, text):
            RESULTS.write_text(f"{START}\n{text}{END}\n")
        print(
            f"written to {RESULTS}"
            + (" and README.md" if between_markers(README, text) else " (README.md has no markers)")
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
