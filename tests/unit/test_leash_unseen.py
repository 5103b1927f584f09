"""The leash's watcher takes in a process whose fork was not done when it looked (agents/leash.py).

A fork takes its pid (and ``/proc/loadavg`` names it) a moment before the process shows in
/proc. A look that fell in between skipped the pid for good, so a shell tool started by a
helper caught that way (the tool in a session of its own) would outlive the agent. /proc is
simulated here: the moment is too short to hit on purpose with real processes.
"""

from __future__ import annotations

import pytest

from polypilot_tui.agents import leash
from polypilot_tui.agents.leash import UNSEEN_LOOKS, Proc, Tree

AGENT, HELPER, TOOL = 1000, 1001, 1002


class FakeProc:
    """A /proc the test fills in: pid -> Proc, and the last pid handed out."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.procs: dict[int, Proc] = {AGENT: Proc(1, 999, 10)}
        self.last = AGENT
        monkeypatch.setattr(leash, "read_proc", self.procs.get)
        monkeypatch.setattr(leash, "_last_pid", lambda: self.last)
        monkeypatch.setattr(leash, "_leads_its_process", lambda pid: pid in self.procs)
        monkeypatch.setattr(leash, "_all_pids", lambda: sorted(self.procs))

    def tree(self) -> Tree:
        """A watcher's view of the agent, started before the agent forked anything."""
        tree = Tree(AGENT, since=AGENT)
        tree.session = 999  # the agent's session (the watcher's own, in real life)
        return tree


def test_a_pid_whose_fork_was_not_done_is_looked_at_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeProc(monkeypatch)
    tree = fake.tree()
    fake.last = HELPER  # the agent's fork of a helper has begun: the pid is handed out, /proc is empty
    tree.refresh()
    assert HELPER not in tree.known
    fake.procs[HELPER] = Proc(AGENT, 2000, 11)  # the fork is done; the helper leaves the session
    fake.procs[TOOL] = Proc(HELPER, 2000, 12)  # and starts the tool in its new session
    fake.last = TOOL
    tree.refresh()
    assert {HELPER, TOOL} <= set(tree.known), "the helper (and so the tool) escaped the leash"
    del fake.procs[HELPER]  # the helper exits: the tool keeps only its (known) session
    assert TOOL in tree.everything()


def test_a_pid_that_never_shows_is_given_up_after_a_few_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeProc(monkeypatch)
    tree = fake.tree()
    fake.last = HELPER  # a process that ended before any look
    for _ in range(UNSEEN_LOOKS):
        tree.refresh()
    fake.procs[HELPER] = Proc(1, 3000, 50)  # the pid, reused much later by a stranger
    tree.refresh()
    assert HELPER not in tree.known


def test_a_stranger_that_takes_an_unseen_pid_is_not_taken_in(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeProc(monkeypatch)
    tree = fake.tree()
    fake.last = HELPER
    tree.refresh()
    fake.procs[HELPER] = Proc(1, 3000, 50)  # neither the agent's child nor in a session of its
    tree.refresh()
    assert HELPER not in tree.known
