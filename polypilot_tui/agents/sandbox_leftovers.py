"""What a stopped turn's tools left in a sandbox, ended with the turn.

A sandboxed agent runs as ``bwrap -> bwrap's init (pid 1 of the sandbox's pid namespace) ->
agent`` (agents/sandbox.py). Measured with the Copilot CLI 1.0.102, headless and ``--acp``:
it keeps no shell between tool calls; it runs each shell tool as its child in a session of
its own (Node's ``detached``), and on an abort it ends that tool — but a process the tool put
in a session of its own (``setsid cmd &``, a daemon's double fork) is reparented to the init
and runs on, as it would without the sandbox. The sandbox tells them apart: everything in it
is the agent's or its tools'.

So when a turn starts, the sandbox's processes are noted: the agent, the helpers it keeps
(an MCP server it started), what earlier turns left running on purpose (a dev server the
user asked for). When the turn is stopped and the agent has honoured the abort, every
process of the sandbox born since is ended, but the agent's own: those in the agent's
session that still descend from it (a helper started without ``detached``). A tool's
process in the agent's session is ended too once its parent is gone (reparented to the
init). An agent killed instead (it did not honour the abort) takes its whole sandbox along.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable

from polypilot_tui.agents.leash import KILL_ROUNDS, Proc, read_proc, signal_if_same
from polypilot_tui.infra.process_tree import descendants

log = logging.getLogger(__name__)

Seen = frozenset[tuple[int, int]]
"""Processes as (pid, start time): a reused pid is another process."""


def sandbox_processes(outer: int) -> dict[int, Proc]:
    """``outer`` (the sandbox's bwrap, as the backend started it) and every live process below
    it. Every process of a pid namespace descends from its init (orphans are reparented to
    it), so this is the whole sandbox."""
    return {pid: proc for pid in (outer, *descendants(outer)) if (proc := read_proc(pid)) is not None}


def leftovers(outer: int, before: Seen) -> dict[int, Proc]:
    """The processes of the sandbox below ``outer`` born since ``before`` was noted that are
    not the agent's own (see the module's docstring)."""
    procs = sandbox_processes(outer)
    inits = [pid for pid, proc in procs.items() if proc.ppid == outer]
    if len(inits) != 1:
        return {}  # not a sandbox as agents/sandbox.py starts one: nothing is told apart
    init = inits[0]
    started = sorted((proc.start, pid) for pid, proc in procs.items() if proc.ppid == init)
    if not started:
        return {}
    agent = started[0][1]  # the init's first child; orphans come later
    session = procs[agent].sid

    def the_agents(pid: int) -> bool:
        while pid in procs and procs[pid].sid == session:
            if pid == agent:
                return True
            pid = procs[pid].ppid
        return False

    return {
        pid: proc
        for pid, proc in procs.items()
        if pid not in (outer, init) and (pid, proc.start) not in before and not the_agents(pid)
    }


class TurnLeftovers:
    """A sandboxed backend's turns: :meth:`turn_started` when a prompt goes out, :meth:`end`
    when the turn is stopped and the agent honoured it. ``pid`` gives the sandbox's bwrap."""

    def __init__(self, pid: Callable[[], int | None]) -> None:
        self._pid = pid
        self._before: Seen | None = None

    def turn_started(self) -> None:
        pid = self._pid()
        self._before = None if pid is None else frozenset((p, proc.start) for p, proc in sandbox_processes(pid).items())

    def end(self) -> int:
        """Kill what the turn's tools left in the sandbox (a blocking look at /proc: run it in
        a thread); returns how many processes were ended."""
        pid, before = self._pid(), self._before
        if pid is None or before is None:
            return 0
        ended: set[tuple[int, int]] = set()
        for _ in range(KILL_ROUNDS):  # a tool may fork while it is being killed
            left = leftovers(pid, before)
            if not left:
                break
            for child, proc in left.items():
                signal_if_same(child, proc, signal.SIGKILL)
                ended.add((child, proc.start))
            time.sleep(0.01)
        if ended:
            log.info("ended %d process(es) a stopped turn's tools left in the sandbox", len(ended))
        return len(ended)
