"""A finished headless run ends without the interpreter's teardown, losing nothing (entry.leave_now)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent("""
    import atexit, logging, sys, threading, time
    from polypilot_tui.entry import leave_now

    out = sys.argv[1]
    atexit.register(lambda: open(out + ".teardown", "w").close())
    handler = logging.StreamHandler(open(out + ".log", "w"))  # buffered: written on flush only
    logging.getLogger("t").addHandler(handler)
    logging.getLogger("t").warning("logged before the end")
    sys.stdout.write("printed before the end")  # a pipe: block-buffered
    if sys.argv[2] == "busy":
        def work():
            time.sleep(0.3)
            open(out + ".work", "w").close()
        threading.Thread(target=work).start()
    leave_now(3)
    sys.exit(5)  # reached only when leave_now returned
""")


def ended(tmp_path: Path, threads: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(out), threads], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    return done, out


def test_alone_it_leaves_at_once_with_its_code_and_flushed_streams(tmp_path: Path) -> None:
    done, out = ended(tmp_path, "alone")
    assert done.returncode == 3, done.stderr
    assert done.stdout == "printed before the end"
    assert Path(f"{out}.log").read_text() == "logged before the end\n"
    assert not Path(f"{out}.teardown").exists(), "the interpreter's teardown ran"


def test_with_another_thread_at_work_it_returns_and_the_usual_exit_waits(tmp_path: Path) -> None:
    done, out = ended(tmp_path, "busy")
    assert done.returncode == 5, done.stderr
    assert Path(f"{out}.work").exists(), "the thread's work was cut short"
    assert Path(f"{out}.teardown").exists()
    assert done.stdout == "printed before the end"
