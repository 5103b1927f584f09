"""`polypilot` as a user starts it: a fresh process on a pty, timed to its first frame, beside a
minimal Textual app (the floor: what the platform itself costs).

Three starts alternate, each a fresh process on a pseudo-terminal of 120 x 36, timed from the
spawn until the bytes written to the terminal hold every marker of its first frame, then ended
with ctrl+q:

- the floor: a minimal Textual app written here (a header, a list of three rows, an input with
  a hint, a footer); its markers are the three rows and the hint;
- ``polypilot`` attached to an engine that already runs, in a fresh state folder with a few
  saved sessions (the engine is started before the runs, as a user's runs, outside the timing);
- ``polypilot`` with no engine running, in a state folder with the same saved sessions: it
  starts the engine (stopped again after each run, outside the timing).

The dashboard's markers are every saved session's name (the session list) and the prompt's
hint ("Enter sends"). Bytecode is cached as after ``pip install`` (PYTHONDONTWRITEBYTECODE is
dropped, and each start runs once untimed first): compiling our modules from source at every
start is no cost a user pays. Medians and ratios to the floor are printed, and the range of
the rounds' own ratios.

    python -m bench.process_start [--repeat 11]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Sequence
from pathlib import Path

from bench._support import Row, ms_ratio

TIMEOUT = 60.0
NO_ENGINE = 5
"""``polypilot engine stop``'s exit code when none runs."""
ROWS, COLUMNS = 36, 120
HINT = "Enter sends"
SESSIONS = ("alpha session", "beta session", "gamma session")
"""The saved sessions of both state folders: each name is a marker of the dashboard's first frame."""

MINIMAL_APP = f"""
from textual.app import App
from textual.widgets import Footer, Header, Input, Label, ListItem, ListView

class Minimal(App):
    BINDINGS = [("ctrl+q", "quit", "Quit")]

    def compose(self):
        yield Header()
        yield ListView(*(ListItem(Label(name)) for name in {SESSIONS!r}))
        yield Input(placeholder="Message alpha · {HINT} · ctrl+j new line")
        yield Footer()

Minimal().run()
"""
"""The floor: a minimal Textual app with what the dashboard's first frame shows."""

ESCAPE = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def polypilot_argv() -> list[str]:
    """How a user starts the dashboard: the installed ``polypilot`` script, else ``-m``."""
    script = Path(sys.executable).with_name("polypilot")
    return [str(script)] if script.exists() else [sys.executable, "-m", "polypilot_tui"]


def environment(state: Path) -> dict[str, str]:
    """This state folder and an empty config folder; none of the developer's POLYPILOT_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env |= {"POLYPILOT_STATE_DIR": str(state / "state"), "POLYPILOT_CONFIG_DIR": str(state / "config")}
    env |= {"TERM": "xterm-256color", "POLYPILOT_RECORD": "false", "POLYPILOT_DEFAULT_AGENT": "demo"}
    for name in ("COLUMNS", "LINES", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    return env


def saved_sessions(state: Path) -> None:
    """A state folder whose registry holds :data:`SESSIONS` (demo agent, a few rows each), in ``state``."""
    from polypilot_tui.domain.chat import ChatItem, ItemKind
    from polypilot_tui.storage.registry import SessionRecord
    from polypilot_tui.storage.store import Store

    folder = state / "work"
    folder.mkdir(parents=True, exist_ok=True)
    store = Store(state / "state")
    now = time.time()
    records = [
        SessionRecord(
            id=f"s{i}",
            name=name,
            agent="demo",
            cwd=str(folder),
            agent_session_id=f"demo-{i:012d}",
            created_at=now - 86400,
            status="idle",
            last_activity_at=now - 60 * i,
        )
        for i, name in enumerate(SESSIONS)
    ]
    store.registry.save(records, now)
    kinds = (ItemKind.USER, ItemKind.ASSISTANT)
    store.history.write(
        [
            (r.id, j, ChatItem(kinds[j % 2], f"message {j} of {r.name}", now - 3600 + j))
            for r in records
            for j in range(6)
        ]
    )
    store.close()


def engine(state: Path, action: str) -> None:
    """``polypilot engine start|stop`` for this state folder (a user's own command, outside the timing)."""
    done = subprocess.run(
        [*polypilot_argv(), "engine", action], env=environment(state), cwd=state, capture_output=True, timeout=60
    )
    if done.returncode != 0 and not (action == "stop" and done.returncode == NO_ENGINE):
        raise RuntimeError(f"polypilot engine {action}: {done.stderr.decode(errors='replace')[-500:]}")


def first_frame(argv: Sequence[str], markers: Sequence[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from spawning ``argv`` on a pty until every marker has been written to it."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    wanted = [m.encode() for m in markers]
    began = time.perf_counter()
    proc = subprocess.Popen(
        list(argv), stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
    )
    os.close(slave)
    raw = b""
    try:
        while not all(m in ESCAPE.sub(b"", raw) for m in wanted):
            if time.perf_counter() - began > TIMEOUT or proc.poll() is not None:
                missing = [m for m in wanted if m not in ESCAPE.sub(b"", raw)]
                raise RuntimeError(f"no first frame within {TIMEOUT:g} s (missing {missing}): {raw[-800:]!r}")
            if select.select([master], [], [], 0.5)[0]:
                raw += os.read(master, 65536)
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


def spread(ours: Sequence[float], floors: Sequence[float]) -> str:
    """The ratio of each round (a start of ours over the floor's start of the same round), as a
    range: how far one run's median may be from another's."""
    ratios = sorted(o / f for o, f in zip(ours, floors, strict=True))
    return f" (rounds {ratios[0]:.2f}-{ratios[-1]:.2f}x)"


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(prog="bench.process_start", description=__doc__.splitlines()[0])
    # 11 rounds: with 7, the median of a run on a quiet machine moved by ~0.1x from run to run.
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args([] if argv is None else argv)  # `python -m bench` calls main()
    # Short /tmp paths: the engine's Unix socket path must fit in 107 bytes.
    attached_dir, cold_dir = (Path(tempfile.mkdtemp(prefix="ppfs-", dir="/tmp")) for _ in range(2))
    minimal: list[float] = []
    attached: list[float] = []
    cold: list[float] = []
    markers = [*SESSIONS, HINT]
    try:
        for state in (attached_dir, cold_dir):
            saved_sessions(state)
        engine(attached_dir, "start")
        for _ in range(args.repeat + 1):  # the first round, untimed, leaves the bytecode cached
            minimal.append(
                first_frame([sys.executable, "-c", MINIMAL_APP], markers, environment(attached_dir), attached_dir)
            )
            attached.append(first_frame(polypilot_argv(), markers, environment(attached_dir), attached_dir))
            cold.append(first_frame(polypilot_argv(), markers, environment(cold_dir), cold_dir))
            engine(cold_dir, "stop")
        for times in (minimal, attached, cold):
            del times[0]
    finally:
        engine(attached_dir, "stop")
        engine(cold_dir, "stop")
        shutil.rmtree(attached_dir, ignore_errors=True)
        shutil.rmtree(cold_dir, ignore_errors=True)
    floor, warm, fresh = (statistics.median(x) * 1000 for x in (minimal, attached, cold))
    print(f"process start to the first frame on a pty, median of {args.repeat} alternating runs (fresh process each)")
    print(f"  minimal Textual app (the floor): {floor:6.0f} ms (min {min(minimal) * 1000:.0f})")
    for label, times, median in (("engine running:    ", attached, warm), ("no engine running: ", cold, fresh)):
        least = min(times) * 1000
        print(
            f"  polypilot, {label}   {median:6.0f} ms (min {least:.0f}): {median / floor:.2f}x{spread(times, minimal)}"
        )
    return [
        (
            "first frame of `polypilot` attached to a running engine vs a minimal Textual app",
            ms_ratio(warm, floor),
            "≤ 1.5x",
        ),
        (
            "first frame of `polypilot` with no engine running (it starts one) vs a minimal Textual app",
            ms_ratio(fresh, floor),
            "≤ 2x",
        ),
    ]


if __name__ == "__main__":
    main(sys.argv[1:])
