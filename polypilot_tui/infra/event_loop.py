"""Our one way to run an event loop: ``asyncio.run``, after which the tasks already cancelled
end inside the loop before it closes.

``asyncio.run`` cancels every task left at its end at once. A task cancelled while it starts a
process (``asyncio.create_subprocess_exec``: git, an agent, a notifier) waits there for the
process's end, which its pipes' task reports; cancelled at the same moment, that task never
does, and the loop's end waits forever (Python 3.11; CPython issue 125502). Whoever cancels a
task should wait for it (:func:`cancel_and_wait`, as the engine does); what is left cancelled and
not waited for (a Textual worker at the app's end, a request the web server gave up) is given
:data:`SETTLE_SECONDS` here to end on its own, nothing else cancelled meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

SETTLE_SECONDS = 1.0
"""Seconds the tasks already cancelled have to end before the loop closes, at most."""


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, the cancelled tasks left behind settled first (:func:`settle`),
    the processes' ends watched by the loop itself (:func:`watch_children_by_pidfd`)."""

    async def settled() -> T:
        try:
            return await main
        finally:
            await settle()

    watch_children_by_pidfd()
    return asyncio.run(settled())


def watch_children_by_pidfd() -> None:
    """Have the loop see a process end through its pidfd (Linux 5.3+), as Python 3.12 does by
    default, instead of 3.11's thread per process blocked in ``waitpid``: that thread is
    slow to be scheduled on a busy machine (~2 ms on each of the change count's two gits,
    with both cores taken). Left as it is where pidfds are missing."""
    if sys.version_info >= (3, 12) or isinstance(asyncio.get_child_watcher(), asyncio.PidfdChildWatcher):
        return
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return
    asyncio.set_child_watcher(asyncio.PidfdChildWatcher())


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has ended, however it ends: what its owner cancels
    ends inside the loop, never left to the loop's end. A task already cancelled is only
    waited for: cancelled again, it would cut short its own clean-up (a git it kills and
    reaps, in workspace/git.py, would be left to the loop's end)."""
    ending = list(tasks)
    for task in ending:
        if not task.cancelling():
            task.cancel()
    await asyncio.gather(*ending, return_exceptions=True)


async def settle(timeout: float = SETTLE_SECONDS) -> None:
    """Wait up to ``timeout`` seconds for the tasks already cancelled to end (none is
    cancelled here, and a task still at work is left to the loop's end as before)."""
    current = asyncio.current_task()
    ending = [task for task in asyncio.all_tasks() if task is not current and task.cancelling()]
    if ending:
        await asyncio.wait(ending, timeout=timeout)
