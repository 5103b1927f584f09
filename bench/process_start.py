"""`polypilot` as a user starts it: process start to the first frame, against Python's own start.

Each run is a fresh process on a pseudo-terminal with an empty state folder of its own (no
engine to attach to: ``--in-process``, the engine inside the dashboard), timed from the spawn
to the first frame that shows the prompt ("Enter sends"), then ended with ctrl+q. The floor is
the same interpreter starting and exiting (``python -c pass``) and importing Textual alone.
Runs alternate; medians and ratios are printed.

    python -m bench.process_start [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._support import Row

FIRST_FRAME = b"Enter sends"
TIMEOUT = 60.0


def python_start(code: str) -> float:
    """Seconds for ``python -c code`` to start and exit."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - began


def dashboard_start() -> float:
    """Seconds from spawning ``polypilot --in-process`` on a pty to its first frame."""
    state = Path(tempfile.mkdtemp(prefix="pp-bench-start-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env |= {"POLYPILOT_STATE_DIR": str(state / "state"), "POLYPILOT_CONFIG_DIR": str(state / "config")}
    env |= {"TERM": "xterm-256color", "POLYPILOT_RECORD": "false"}
    master, slave = pty.openpty()
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "polypilot_tui", "--in-process"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=state,
        start_new_session=True,
    )
    os.close(slave)
    screen = b""
    try:
        while FIRST_FRAME not in screen.replace(b"\x1b[", b""):
            if time.perf_counter() - began > TIMEOUT or proc.poll() is not None:
                raise RuntimeError(f"no first frame within {TIMEOUT:g} s: {screen[-500:]!r}")
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                screen += os.read(master, 65536)
        took = time.perf_counter() - began
        os.write(master, b"\x11")  # ctrl+q
        deadline = time.perf_counter() + 20
        while proc.poll() is None and time.perf_counter() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
        return took
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        os.close(master)
        shutil.rmtree(state, ignore_errors=True)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(prog="bench.process_start", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args([] if argv is None else argv)  # `python -m bench` calls main()
    bare: list[float] = []
    textual: list[float] = []
    dashboard: list[float] = []
    for _ in range(args.repeat):
        bare.append(python_start("pass"))
        textual.append(python_start("import textual.app"))
        dashboard.append(dashboard_start())
    floor, with_textual, first = (statistics.median(x) for x in (bare, textual, dashboard))
    print(f"process start to first frame, median of {args.repeat} alternating runs (fresh process each)")
    print(f"  python -c pass:            {floor * 1000:7.0f} ms")
    print(f"  python -c 'import textual': {with_textual * 1000:6.0f} ms")
    fastest = min(dashboard) * 1000
    print(f"  polypilot --in-process:    {first * 1000:7.0f} ms to the first frame (min {fastest:.0f} ms)")
    print(f"  ratio to Python's start: {first / floor:.1f}x; to importing Textual: {first / with_textual:.1f}x")
    figure = (
        f"{first * 1000:.0f} ms (Python starts in {floor * 1000:.0f} ms, imports Textual in {with_textual * 1000:.0f})"
    )
    return [("process start to the first frame (`polypilot --in-process` on a pty)", figure, "")]


if __name__ == "__main__":
    main(sys.argv[1:])
