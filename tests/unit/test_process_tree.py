"""The processes below a process (infra/process_tree.py), read from /proc on real processes,
in both ways a kernel allows (each thread's children listed, or every process's parent read):
found each before its own children, and a process that ends while the walk reads it (its
folder gone: FileNotFoundError, or ProcessLookupError) has none, the walk going on with the
others. Both kills that walk it, an ACP agent's and the Copilot CLI's, end every process."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from polypilot_tui.agents.acp.process import terminate
from polypilot_tui.agents.copilot.runtime import kill_tree
from polypilot_tui.agents.leash import read_proc
from polypilot_tui.infra import process_tree
from polypilot_tui.infra.process_tree import descendants
from tests.support.waiting import until_blocking

TREE = "sh -c 'sleep 30; :' & sh -c 'sleep 30; :' & wait"
"""A shell with two shells below it, each with a sleep below it (``; :``: not exec'd)."""


@pytest.fixture(params=["children listed", "by parents"])
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each way of walking, as a kernel with and without CONFIG_PROC_CHILDREN does it."""
    if request.param == "by parents":
        monkeypatch.setattr(process_tree, "_children_listed", lambda: False)
    elif not process_tree._children_listed():  # noqa: SLF001 - what this kernel does
        pytest.skip("this kernel does not list children")
    return str(request.param)


def tree(proc: subprocess.Popen[bytes]) -> list[int]:
    """Wait until the shell's four processes are there: them."""
    return until_blocking(lambda: len(found := descendants(proc.pid)) == 4 and found, 10, "the four processes")


@pytest.fixture
def groups() -> Iterator[list[int]]:
    """Process groups the test started, each killed at its end (whatever the test did)."""
    started: list[int] = []
    yield started
    for group in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)


@pytest.fixture
def shells(groups: list[int]) -> Iterator[subprocess.Popen[bytes]]:
    """:data:`TREE` in a group of its own, ended with the test."""
    proc = subprocess.Popen(["sh", "-c", TREE], start_new_session=True)
    groups.append(proc.pid)
    yield proc
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def parent(pid: int) -> int:
    proc = read_proc(pid)
    assert proc is not None
    return proc.ppid


def ending(monkeypatch: pytest.MonkeyPatch, pid: int, error: type[OSError]) -> None:
    """``pid`` ends while the walk reads it: its folder is found but raises ``error`` when read
    (the calls the walk reads /proc with), made certain rather than hoped for."""
    real_listdir, real_open = os.listdir, builtins.open

    def gone(path: Any) -> bool:
        return str(os.fspath(path)).startswith(f"/proc/{pid}/")

    def listdir(path: Any = ".") -> list[str]:
        if gone(f"{os.fspath(path)}/"):
            raise error(2, "gone", path)
        return real_listdir(path)

    def opened(path: Any, *args: Any, **kwargs: Any) -> Any:
        if gone(path):
            raise error(2, "gone", path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.setattr(process_tree, "open", opened, raising=False)


def test_every_process_below_is_found_each_before_its_children(walk: str, shells: subprocess.Popen[bytes]) -> None:
    found = tree(shells)
    middle = [pid for pid in found if parent(pid) == shells.pid]
    assert len(middle) == 2 and len(set(found)) == 4
    for i, pid in enumerate(found):  # its parent is the shell or found before it
        assert parent(pid) == shells.pid or parent(pid) in found[:i]


@pytest.mark.parametrize("error", [FileNotFoundError, ProcessLookupError])
def test_a_process_that_ends_during_the_walk_has_no_children_and_the_walk_goes_on(
    walk: str, shells: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch, error: type[OSError]
) -> None:
    found = tree(shells)
    one, other = [pid for pid in found if parent(pid) == shells.pid]
    below_other = [pid for pid in found if parent(pid) == other]
    ending(monkeypatch, one, error)
    seen = descendants(shells.pid)
    assert other in seen and below_other and set(below_other) <= set(seen)
    assert not [pid for pid in seen if pid != one and parent(pid) == one]  # it has none now
    if walk == "children listed":  # (by parents, its children are found by their own parent field)
        ending(monkeypatch, shells.pid, error)
        assert descendants(shells.pid) == []  # the process walked from itself: none at all


def ended(pids: list[int]) -> Callable[[], bool]:
    return lambda: all(read_proc(pid) is None for pid in pids)


def test_both_kills_end_every_process_though_one_ends_during_the_walk(
    walk: str, monkeypatch: pytest.MonkeyPatch, groups: list[int]
) -> None:
    """An ACP agent's terminate and the Copilot CLI's kill_tree, each on a tree of its own."""

    async def acp() -> list[int]:
        proc = await asyncio.create_subprocess_exec("sh", "-c", TREE, start_new_session=True)
        groups.append(proc.pid)
        below = until_blocking(lambda: len(found := descendants(proc.pid)) == 4 and found, 10, "the four processes")
        with monkeypatch.context() as patched:
            ending(patched, below[0], ProcessLookupError)
            await asyncio.wait_for(terminate(proc), 10)
        assert proc.returncode is not None
        return below

    below = asyncio.run(acp())
    until_blocking(ended(below), 10, "the ACP agent's processes ended")

    cli = subprocess.Popen(["sh", "-c", TREE], start_new_session=True)
    groups.append(cli.pid)
    below = tree(cli)
    with monkeypatch.context() as patched:
        ending(patched, below[0], FileNotFoundError)
        kill_tree(cli)
    cli.wait(10)
    until_blocking(ended(below), 10, "the CLI's processes ended")
