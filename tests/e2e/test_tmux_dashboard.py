"""``polypilot`` in a real terminal (tmux) with the real Copilot CLI, as a person uses it.

Keys go in with ``tmux send-keys`` and the screen comes back with ``capture-pane``: the
same bytes a person's terminal shows, through the real driver, bracketed keys and all. One
session: a prompt and its streamed reply, a tool whose permission prompt is answered by key,
Stop in the middle of a reply, Reconnect, quit, and a second start that shows it all again;
then a quit in the middle of a reply, which the engine finishes while no dashboard is attached.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.tmux import Terminal
from tests.support.copilot_harness import agents_toml, home_processes, run_env
from tests.support.model_server import ModelServer
from tests.support.waiting import until_blocking

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = Path(__file__).parents[2]


async def test_polypilot_in_tmux_with_the_copilot_cli(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    agents = tmp_path / "agents.toml"
    agents.write_text(agents_toml(copilot_cli, model_server, tmp_path))
    env = run_env(state, agents, TERM="xterm-256color", POLYPILOT_STOP_GRACE_SECONDS="8")
    command = [sys.executable, "-m", "polypilot_tui.cli"]
    term = Terminal(command, env, ROOT)
    try:
        screen = term.wait_for("Idle — type a prompt below")
        # The whole pane, although pytest's environment exports COLUMNS=80 (the app drops it).
        assert max(map(len, screen.splitlines())) > 120, screen

        term.type("hello from tmux")
        term.keys("Enter")
        term.wait_for("echo: hello from tmux", "Idle")

        term.type("TOOL now")
        term.keys("Enter")
        screen = term.wait_for("Permission requested", "Allow once", "ctrl+g to answer by key")
        assert "[y]" not in screen  # the keyboard is in the prompt: there y is text
        term.keys("C-g")
        term.wait_for("Allow once [y]")  # the keys show once they answer
        term.keys("y")
        screen = term.wait_for("done: hi", "✓ bash")
        assert "waiting" not in screen

        term.type("SLOW please")
        term.keys("Enter")
        term.wait_for("Writing", "word3")
        term.keys("C-x")
        term.wait_for("Stopped", "interrupted")

        term.keys("C-r")
        term.wait_for("Session reconnected: resumed")
        screen = term.wait_for("Idle")
        assert "Stopped" not in screen.splitlines()[-3]  # the status line moved on

        term.type("a draft kept over the restart")
        term.keys("C-q")
        term.wait_until_dead()

        term.restart(command)
        screen = term.wait_for("done: hi", "Session reconnected: resumed", "a draft kept over the restart")
        # Known and open: a restarted dashboard rarely draws 80 columns in this 150-column pane
        # (about 1 CI run in 4; its terminal has the pane's size at start; cause not found).
        # What a person then does — resize the terminal — must bring the whole pane back.
        term.resize(149, 45)
        term.resize(150, 45)
        until_blocking(
            lambda: max(map(len, term.screen().splitlines())) > 120,
            15,
            lambda: f"the dashboard to follow a resize:\n{term.screen()}",
            every=0.1,
        )
        term.keys("C-u")  # the editor's "delete to line start": an empty prompt again
        term.type("after the restart")
        term.keys("Enter")
        term.wait_for("echo: after the restart", "Idle")  # the turn over: the next prompt is sent, not queued

        # Quit in the middle of a reply (held there until the dashboard is gone): the engine goes
        # on with it, and the next start shows it whole.
        model_server.hold()
        term.type("SLOW again please")
        term.keys("Enter")
        term.wait_for("SLOW again please", "Writing")
        term.keys("C-q")
        term.wait_for("Quit while turns run?", "1 turn running", "Stop the engine too [s]")
        term.keys("y")
        term.wait_until_dead()
        status = engine_command(env, "status", "--json")
        assert status["running_turns"] == 1 and status["attached"] == 0, status
        model_server.release()
        term.restart(command)
        screen = term.wait_for("word59", "Idle")
        assert "interrupted" not in screen.split("SLOW again please")[-1]
        term.keys("C-q")  # nothing running: it quits at once, and the engine stays
        term.wait_until_dead()
        assert engine_command(env, "status", "--json")["sessions"] == 1
    finally:
        term.close()
        engine_command(env, "stop", check=False)
    assert not home_processes(tmp_path / "copilot-home"), "a Copilot CLI outlived the engine"


def engine_command(env: dict[str, str], action: str, *args: str, check: bool = True) -> dict[str, Any]:
    """``polypilot engine ACTION`` from a shell, as a person would type it."""
    done = subprocess.run(
        [sys.executable, "-m", "polypilot_tui.cli", "engine", action, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if "--json" in args and done.stdout else {}
