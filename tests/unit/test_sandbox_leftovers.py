"""What a stopped turn's tools left in a sandbox is ended, and nothing of the agent's: in real
bubblewrap, an agent (a small script) starts each kind of process the real agents do."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from polypilot_tui.agents.sandbox import sandbox_problem, sandboxed
from polypilot_tui.agents.sandbox_leftovers import TurnLeftovers
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode, SandboxRules
from tests.support.processes import sleeping
from tests.support.waiting import until_blocking

ON = Sandbox(SandboxMode.WORKSPACE)
pytestmark = pytest.mark.skipif(sandbox_problem(ON) is not None, reason=f"no sandbox here: {sandbox_problem(ON)}")

AGENT = textwrap.dedent(
    """
    import subprocess, sys
    kept = []
    for line in sys.stdin:
        what, marker = line.split()
        if what == "helper":  # the agent's own, in its session, its child for good
            kept.append(subprocess.Popen(["sleep", marker]))
        elif what == "tool":  # a tool still running, in a session of its own (Node's detached)
            kept.append(subprocess.Popen(["sleep", marker], start_new_session=True))
        elif what == "daemon":  # a tool's `setsid cmd &`: its shell ends, the init adopts it
            subprocess.run(["sh", "-c", f"setsid sleep {marker} > /dev/null 2>&1 &"])
        elif what == "orphan":  # a tool's `cmd &` in the agent's session, its shell gone
            subprocess.run(["sh", "-c", f"sleep {marker} > /dev/null 2>&1 &"])
        print("ok", flush=True)
    """
)


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """The script in bwrap as agents/sandbox.py starts an agent (ended by the test)."""
    argv = sandboxed([sys.executable, "-c", AGENT], SandboxRules(writable=(str(tmp_path),)), tmp_path)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yield proc
    proc.kill()
    proc.wait(10)


def tell(agent: subprocess.Popen[str], what: str, marker: str) -> None:
    assert agent.stdin is not None and agent.stdout is not None
    agent.stdin.write(f"{what} {marker}\n")
    agent.stdin.flush()
    assert agent.stdout.readline() == "ok\n"


def test_a_stopped_turn_loses_what_its_tools_left_and_the_agent_keeps_its_own(
    agent: subprocess.Popen[str],
) -> None:
    mark = {
        name: f"{n}.{os.getpid() % 1000}7"
        for n, name in enumerate(("helper", "earlier", "mine", "tool", "daemon", "orphan"), 5000)
    }
    tell(agent, "helper", mark["helper"])
    tell(agent, "daemon", mark["earlier"])  # an earlier turn's (a dev server the user asked for)
    turn = TurnLeftovers(lambda: agent.pid)
    turn.turn_started()
    tell(agent, "helper", mark["mine"])  # a helper the agent starts during the turn
    for kind in ("tool", "daemon", "orphan"):
        tell(agent, kind, mark[kind])
    # a backgrounded sleep is a forked shell for a moment before it execs
    until_blocking(lambda: all(sleeping(marker) for marker in mark.values()), 10, "every sleep running")
    assert turn.end() == 3
    assert [name for name, marker in mark.items() if sleeping(marker)] == ["helper", "earlier", "mine"]
    tell(agent, "helper", f"5100.{os.getpid() % 1000}7")  # the agent goes on
    turn.turn_started()
    assert turn.end() == 0  # a turn that left nothing
    assert agent.poll() is None
