"""An agent stopped by a group kill the moment it has started: what it moved to another group
of its session dies too (agents/leash.py). Found in review: the shell launcher's watcher was
still in the agent's group until its Python had started (~30 ms), so the kill took it too and
the agent's child outlived the agent and the app. Both launcher paths: the shell's (a new
session) and the Python one it falls back to."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

APP = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    sys.path.insert(0, sys.argv[1])
    from polypilot_tui.agents.leash import leashed
    agent = subprocess.Popen(leashed(sys.argv[3:]), start_new_session=sys.argv[2] == "new session")
    started = time.monotonic()
    while not os.path.exists(sys.argv[-1]) and time.monotonic() - started < 20:
        time.sleep(0.001)
    os.killpg(agent.pid, signal.SIGKILL)  # at once: the agent's watcher may not run yet
    agent.wait()
    time.sleep(0.5)
""")

# A child in a group of its own, in the agent's session, made at once (perl starts in ~2 ms).
AGENT = 'if (!fork) { setpgrp(0, 0); open(F, ">", $ARGV[0]); print F $$; close F; sleep 300 } sleep 300'


@pytest.mark.skipif(shutil.which("perl") is None or not Path("/proc").is_dir(), reason="needs perl and /proc")
@pytest.mark.parametrize("launcher", ["new session", "fallback"])
def test_a_child_that_left_the_group_dies_with_an_agent_group_killed_at_once(tmp_path: Path, launcher: str) -> None:
    pid_file = tmp_path / "child"
    subprocess.run(
        [sys.executable, "-c", APP, str(ROOT), launcher, "perl", "-e", AGENT, str(pid_file)], timeout=30, check=True
    )
    deadline = time.monotonic() + 20
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    child = int(pid_file.read_text())
    end = time.monotonic() + 5
    alive = True
    while alive and time.monotonic() < end:
        try:
            os.kill(child, 0)
            with open(f"/proc/{child}/stat") as stat:
                alive = stat.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            alive = False
        time.sleep(0.05)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, "the agent's child outlived the agent and the app: no watcher was left"
