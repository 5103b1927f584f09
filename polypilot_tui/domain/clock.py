"""The one clock: real time in the app, virtual time in tests and ``polypilot replay``.

Everything that reads the time or waits takes a :class:`Clock`. ``now()`` is monotonic
seconds (only differences matter); ``wall()`` is epoch seconds for what gets persisted.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class TimerHandle(Protocol):
    """A scheduled callback that can be cancelled."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Time source and timer scheduler."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def wall(self) -> float:
        """Epoch seconds, for timestamps that outlive the process."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once ``now() >= when``."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


async def within(clock: Clock, awaitable: Awaitable[T], seconds: float) -> T:
    """``awaitable``'s result, or :class:`TimeoutError` once ``seconds`` of ``clock``'s time pass.

    Like :func:`asyncio.wait_for`, but on the one clock (so a grace period runs in virtual time
    in tests), and a timed-out awaitable is cancelled without waiting for it: the case this is
    for is an agent that ignores even that.
    """
    task = asyncio.ensure_future(awaitable)
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({task, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        given_up = not task.done()
        if given_up:
            task.cancel()
            task.add_done_callback(_retrieve)
    if given_up:
        raise TimeoutError
    return task.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Read a given-up task's outcome, so a late failure is not logged as never retrieved."""
    if not task.cancelled():
        task.exception()


class SystemClock:
    """Real time on the running asyncio loop."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        return loop.call_later(max(0.0, when - self.now()), callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class _FakeTimer:
    __slots__ = ("when", "callback", "cancelled")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self.callback = _noop  # release what the callback holds (turns, sessions) at once


def _noop() -> None:
    return None


class FakeClock:
    """Virtual time: nothing happens until :meth:`advance` moves the clock.

    Timers fire in deadline order, each at exactly its deadline, and between timers the
    asyncio loop is given a chance to run whatever the timer woke up. A 2-hour scenario
    therefore replays in milliseconds and gives the same answer every time.
    """

    def __init__(self, start: float = 0.0, wall_epoch: float = 1_767_225_600.0) -> None:
        self._now = start
        self._wall_epoch = wall_epoch - start
        self._heap: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._wall_epoch + self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _FakeTimer(max(when, self._now), callback)
        heapq.heappush(self._heap, (timer.when, next(self._seq), timer))
        return timer

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        handle = self.call_at(self._now + max(0.0, seconds), wake)
        try:
            await future
        finally:
            handle.cancel()

    def next_deadline(self) -> float | None:
        """The earliest live timer, or None."""
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    async def settle(self, rounds: int = 25) -> None:
        """Let the loop run everything that is ready (tasks woken by timers or events)."""
        for _ in range(rounds):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing every timer due on the way."""
        await self.advance_to(self._now + seconds)

    async def advance_to(self, target: float) -> None:
        """Move time forward to ``target``, firing every timer due on the way."""
        await self.settle()
        while True:
            deadline = self.next_deadline()
            if deadline is None or deadline > target:
                break
            _, _, timer = heapq.heappop(self._heap)
            self._now = max(self._now, timer.when)
            timer.callback()
            await self.settle()
        self._now = max(self._now, target)
        await self.settle()
