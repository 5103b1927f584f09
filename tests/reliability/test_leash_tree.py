"""Everything an agent started dies with it, however it regrouped (agents/leash.py).

The QA finding: the Copilot CLI runs a shell tool in a session of its own (Node's
``detached``), so after ``kill -9`` of the CLI a ``sleep 20`` lived on (parent 1, its own
group) while the dashboard said the tool was interrupted. Here a real agent process on the
leash starts children that leave its process group and its session, one of them leaving
an orphan behind, and is SIGKILLed (then, in a second test, the app holding the leash is);
every process it started must be gone within about a second, and a process it did not
start — a bystander born at the same time — must be untouched.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from polypilot_tui.agents.leash import SCAN, Proc, leashed, read_proc, signal_if_same
from tests.support.processes import alive
from tests.support.waiting import until_blocking

AGENT = textwrap.dedent("""
    import os, subprocess, sys, time
    sleep = ["sleep", "300"]
    group = subprocess.Popen(sleep, process_group=0)          # a group of its own
    session = subprocess.Popen(sleep, start_new_session=True)  # a session of its own
    # A session of its own whose child starts an orphan: the child ends at once, so the
    # orphan's parent is 1 by the time anyone looks; only its session ties it to the agent.
    leader = subprocess.Popen([sys.executable, "-c", '''
    import subprocess, sys, time
    orphan = "import subprocess; print(subprocess.Popen(['sleep', '300'], stdout=subprocess.DEVNULL).pid)"
    middle = subprocess.Popen([sys.executable, "-c", orphan], stdout=subprocess.PIPE, text=True)
    print(middle.communicate()[0].strip(), flush=True)
    time.sleep(300)
    '''], start_new_session=True, stdout=subprocess.PIPE, text=True)
    orphan = int(leader.stdout.readline())
    pids = [os.getpid(), group.pid, session.pid, leader.pid, orphan]
    with open(sys.argv[1] + ".part", "w") as out:
        out.write(" ".join(map(str, pids)))
    os.rename(sys.argv[1] + ".part", sys.argv[1])
    time.sleep(300)
""")

APP = textwrap.dedent("""
    import subprocess, sys, time
    sys.path.insert(0, sys.argv[1])
    from polypilot_tui.agents.leash import leashed
    subprocess.Popen(leashed(sys.argv[3:]), start_new_session=sys.argv[2] == "new session")
    time.sleep(300)
""")

LAUNCHERS = pytest.mark.parametrize("launcher", ["new session", "fallback"])
"""The shell launcher's two paths: started in a session of its own (as every caller starts
it), or not (it then execs the Python launcher, which makes the session itself)."""

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def reaper() -> Iterator[list[int]]:
    """Pids to SIGKILL at the end whatever happened (a failing test must not leave sleeps)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def started(pids_file: Path, reaper: list[int]) -> list[int]:
    """The agent's pids once it has started everything; then the watcher gets two looks at them."""
    until_blocking(pids_file.exists, 30, "the agent to start its children")
    pids = [int(p) for p in pids_file.read_text().split()]
    reaper.extend(pids)
    assert all(alive(p) for p in pids), pids
    stats = {pid: read_proc(pid) for pid in pids}
    orphan = stats[pids[4]]
    assert orphan is not None and orphan.ppid not in pids, "the orphan still has its parent"
    assert len({s.sid for s in stats.values() if s is not None}) == 3  # the agent's, and two sessions of tools
    time.sleep(2 * SCAN)  # the watcher looks at new processes every SCAN seconds (the bound under test)
    return pids


def gone_within(pids: list[int], seconds: float) -> float:
    began = time.monotonic()
    # A hang guard; the bound under test is ``seconds``.
    until_blocking(lambda: not any(alive(p) for p in pids), 10, lambda: f"{[p for p in pids if alive(p)]} to end")
    took = time.monotonic() - began
    assert took < seconds, f"the agent's processes outlived it by {took:.2f} s"
    return took


@LAUNCHERS
@pytest.mark.parametrize("kill", ["the agent", "its process group"])
def test_what_a_killed_agent_started_dies_with_it_however_it_regrouped(
    tmp_path: Path, reaper: list[int], kill: str, launcher: str
) -> None:
    """Killing the group is what the app itself does to stop an agent (the Copilot runtime's
    kill_tree, the ACP agent's last resort); it once took the watcher with it, and the tools
    that had left the group lived on (seen in CI after a SIGKILLed Copilot CLI)."""
    pids_file = tmp_path / "pids"
    agent = subprocess.Popen(
        leashed([sys.executable, "-c", AGENT, str(pids_file)]), start_new_session=launcher == "new session"
    )
    bystander = subprocess.Popen(["sleep", "300"])  # born amid the agent's children; not the agent's
    reaper.append(bystander.pid)
    pids = started(pids_file, reaper)
    assert pids[0] == agent.pid  # the leash execs the agent: same pid
    if kill == "the agent":
        agent.send_signal(signal.SIGKILL)
    else:
        os.killpg(agent.pid, signal.SIGKILL)
    agent.wait(10)
    gone_within(pids, 2.0)
    assert bystander.poll() is None, "the watcher killed a process the agent did not start"
    bystander.kill()
    bystander.wait(10)


@LAUNCHERS
def test_what_the_agent_started_dies_with_a_sigkilled_app(tmp_path: Path, reaper: list[int], launcher: str) -> None:
    pids_file = tmp_path / "pids"
    app = subprocess.Popen(
        [sys.executable, "-c", APP, str(ROOT), launcher, sys.executable, "-c", AGENT, str(pids_file)]
    )
    reaper.append(app.pid)
    pids = started(pids_file, reaper)
    app.send_signal(signal.SIGKILL)
    app.wait(10)
    gone_within(pids, 2.0)  # SIGTERM to each, then SIGKILL after the 0.5 s grace


def test_a_pid_is_signalled_only_while_it_is_the_process_that_was_seen() -> None:
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        seen = read_proc(sleeper.pid)
        assert seen is not None
        signal_if_same(sleeper.pid, Proc(seen.ppid, seen.sid, seen.start + 1), signal.SIGKILL)  # another process's pid
        time.sleep(0.2)  # a SIGKILL, had it been sent, ends a sleep well within this
        assert sleeper.poll() is None, "a process that only shares the pid was killed"
        signal_if_same(sleeper.pid, seen, signal.SIGKILL)
        assert sleeper.wait(10) == -signal.SIGKILL
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait(10)


def test_an_agent_whose_watcher_cannot_start_is_not_started(tmp_path: Path) -> None:
    """The interpreter the watcher runs on is gone (a venv rebuilt under a running dashboard):
    the launch fails, saying why, and the agent never runs unwatched."""
    marker = tmp_path / "ran"
    argv = leashed(["sh", "-c", f"touch {marker}"])
    argv[argv.index(sys.executable)] = str(tmp_path / "no-python")
    done = subprocess.run(argv, start_new_session=True, capture_output=True, text=True, timeout=30)
    assert done.returncode == 126 and "the watcher could not start" in done.stderr
    assert not marker.exists()


GROUP_KILL_APP = textwrap.dedent("""
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
LEAVING_AGENT = 'if (!fork) { setpgrp(0, 0); open(F, ">", $ARGV[0]); print F $$; close F; sleep 300 } sleep 300'
"""A child in a group of its own, in the agent's session, made at once (perl starts in ~2 ms)."""


@pytest.mark.skipif(shutil.which("perl") is None, reason="needs perl")
@LAUNCHERS
def test_a_child_that_left_the_group_dies_with_an_agent_group_killed_at_once(
    tmp_path: Path, reaper: list[int], launcher: str
) -> None:
    """Found in review: the shell launcher's watcher was still in the agent's group until its
    Python had started (~30 ms), so a group kill then took it too, and the agent's child
    outlived the agent and the app."""
    pid_file = tmp_path / "child"
    argv = [sys.executable, "-c", GROUP_KILL_APP, str(ROOT), launcher, "perl", "-e", LEAVING_AGENT, str(pid_file)]
    subprocess.run(argv, timeout=30, check=True)
    child = int(pid_file.read_text())
    reaper.append(child)
    until_blocking(lambda: not alive(child), 5, "the agent's child to end with the agent and the app")
