"""A stand-in system notifier: a real executable on a temporary PATH that records its argv."""

from __future__ import annotations

from pathlib import Path

RECORDER = """#!/bin/sh
# a stand-in notify-send: one file per run, one argument per line
n=0
while [ -e "$0.log.$n" ]; do n=$((n+1)); done
for arg in "$@"; do printf '%s\\n' "$arg"; done > "$0.log.$n"
"""


def fake_notifier(folder: Path, body: str = RECORDER, name: str = "notify-send") -> Path:
    """An executable ``name`` in ``folder`` (a PATH entry) running ``body``."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    exe.write_text(body)
    exe.chmod(0o755)
    return exe


def runs(exe: Path) -> list[list[str]]:
    """The argv (without argv[0]) of every run of a recorder, in order."""
    logs = sorted(exe.parent.glob(f"{exe.name}.log.*"), key=lambda p: int(p.suffix[1:]))
    return [p.read_text().splitlines() for p in logs]
