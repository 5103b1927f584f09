"""``polypilot`` in a real terminal (tmux), ended by a signal instead of ctrl+q.

A ``kill`` (SIGTERM) or a closed terminal (SIGHUP) used to end the dashboard on the spot:
the terminal stayed in the alternate screen with mouse tracking on (the user had to type
``reset``), the draft was lost and the running turn was not offered for resending. Each test
here starts the real dashboard on the demo agent in tmux, starts a turn that hangs, types a
draft, ends the app with a signal, and checks what tmux saw of the terminal and what the
state folder holds afterwards; the SIGTERM test starts the app again to see it all come back.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.ui.ui_state import load_ui_state
from tests.e2e.tmux import Terminal
from tests.support.waiting import until_blocking

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ROOT = Path(__file__).parents[2]
# The engine inside the dashboard: a signal ends both (tests/e2e/test_tmux_engine.py has the service).
POLYPILOT = [sys.executable, "-m", "polypilot_tui.cli", "--in-process"]
DRAFT = "a draft the signal must not lose"
CSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]")


def environment(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env.update({"POLYPILOT_STATE_DIR": str(state), "TERM": "xterm-256color", "PYTHONUNBUFFERED": "1"})
    return env


def turn_and_draft(term: Terminal) -> int:
    """A hanging turn in flight and a draft in the prompt; returns the app's pid."""
    term.wait_for("Idle — type a prompt below")
    term.type("!hang")
    term.keys("Enter")
    term.wait_for("Thinking")
    term.type(DRAFT)
    term.wait_for(DRAFT)
    assert term.pane("alternate_on") == "1" and term.pane("mouse_any_flag") == "1"  # what must be undone
    return int(term.pane("pane_pid"))  # `exec`: the pane's process is the app


def saved(state: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The drafts (ui-state.json and the draft files) and the one session of the registry."""
    ui = {"drafts": load_ui_state(state)[0].drafts}
    registry = json.loads((state / "sessions.json").read_text())
    assert len(registry["sessions"]) == 1, registry
    return ui, registry["sessions"][0]


def assert_quit_cleanly(state: Path) -> None:
    ui, session = saved(state)
    assert ui["drafts"] == {session["id"]: DRAFT}
    assert session["interrupted_prompt"] == "!hang", session  # offered for resending (ctrl+y)
    assert "Traceback" not in (state / "polypilot.log").read_text()


def test_sigterm_quits_like_ctrl_q_and_gives_the_terminal_back(tmp_path: Path) -> None:
    state = tmp_path / "state"
    term = Terminal(POLYPILOT, environment(state), ROOT)
    try:
        pid = turn_and_draft(term)
        os.kill(pid, signal.SIGTERM)
        assert term.exit_status() == "status 143"  # 128 + SIGTERM, as a shell reports it
        assert term.pane("alternate_on") == "0", "the app left the terminal in the alternate screen"
        assert term.pane("mouse_any_flag") == "0", "the app left mouse tracking on"
        assert_quit_cleanly(state)

        term.restart(POLYPILOT)  # everything comes back
        term.wait_for(DRAFT, "interrupted when polypilot stopped", "ctrl+y")
        term.keys("C-q")
        term.wait_until_dead()
    finally:
        term.close()


def test_sighup_by_hand_quits_cleanly_and_restores_the_live_terminal(tmp_path: Path) -> None:
    state = tmp_path / "state"
    term = Terminal(POLYPILOT, environment(state), ROOT)
    try:
        pid = turn_and_draft(term)
        os.kill(pid, signal.SIGHUP)
        assert term.exit_status() == "status 129"
        assert term.pane("alternate_on") == "0" and term.pane("mouse_any_flag") == "0"
        assert_quit_cleanly(state)
    finally:
        term.close()


def test_a_closed_terminal_still_saves_and_the_app_leaves(tmp_path: Path) -> None:
    """tmux itself goes (the window closed): the app gets SIGHUP and its terminal is gone."""
    state = tmp_path / "state"
    term = Terminal(POLYPILOT, environment(state), ROOT)
    try:
        pid = turn_and_draft(term)
        term.close()  # the terminal's other end closes: the kernel hangs it up and sends SIGHUP
        until_blocking(lambda: not running(pid), 30, "the app to end with its terminal")
    finally:
        term.close()
    assert_quit_cleanly(state)


def running(pid: int) -> bool:
    """The process exists and has not exited (an exited one may wait for init to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


CONTROLLING = (
    "import fcntl, os, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)
"""Start the app as the session leader of a terminal it controls, as a terminal window does."""


def test_a_hung_up_terminal_ends_the_app_with_129_not_a_crash(tmp_path: Path) -> None:
    """The exit code when the terminal is really gone (tmux cannot tell it once it is gone):
    writing to a hung-up terminal fails, and a failed flush at exit would make it 120."""
    state = tmp_path / "state"
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", CONTROLLING, "-m", "polypilot_tui.cli", "--in-process"],
        cwd=ROOT,
        env=environment(state),
        stdin=slave,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    screen = bytearray()

    def wait_for(needle: str) -> None:
        deadline = time.monotonic() + 60
        while needle not in CSI.sub("", screen.decode("utf-8", "replace")):
            assert proc.poll() is None and time.monotonic() < deadline, bytes(screen[-2000:])
            if select.select([master], [], [], 0.1)[0]:
                screen.extend(os.read(master, 65536))

    try:
        wait_for("type a prompt below")
        os.write(master, DRAFT.encode())
        wait_for(DRAFT)
        os.close(master)  # the window closes (nothing else holds the terminal's other end)
        assert proc.wait(30) == 129
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    ui, _session = saved(state)
    assert list(ui["drafts"].values()) == [DRAFT]
    assert "Traceback" not in (state / "polypilot.log").read_text()
