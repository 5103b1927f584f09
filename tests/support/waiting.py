"""The two ways a test waits: for a condition in real time, and for one in virtual time.

Never sleep-and-hope: :func:`until` polls a condition with a bound (a hang guard, not a
target) and :func:`advance_until` moves a FakeClock timer by timer until the condition holds
(it stops exactly where the condition first holds, and fails when no timer is left).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from polypilot_tui.domain.clock import FakeClock

T = TypeVar("T")
What = str | Callable[[], str]
"""What is waited for, said when it does not come (a callable: read then, with the last state)."""


def _said(what: What) -> str:
    return what if isinstance(what, str) else what()


async def until(
    check: Callable[[], T | Awaitable[T]],
    timeout: float = 20.0,
    what: What = "the condition",
    *,
    every: float = 0.02,
    pause: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """``check()``'s first truthy answer (``check`` may be a coroutine function), polled every
    ``every`` seconds of real time with ``pause`` (a pilot's, to let an app run between polls);
    AssertionError naming ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        answer = check()
        value: T = await answer if inspect.isawaitable(answer) else answer  # type: ignore[assignment]
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{_said(what)}: not within {timeout:g} s")
        await pause(every)


def until_blocking(
    check: Callable[[], T], timeout: float = 20.0, what: What = "the condition", *, every: float = 0.02
) -> T:
    """:func:`until` for a test without a loop (a process or a thread to wait on): blocks."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{_said(what)}: not within {timeout:g} s")
        time.sleep(every)
    return value


async def advance_until(
    clock: FakeClock,
    check: Callable[[], object],
    *,
    within: float = 10_000.0,
    what: What = "the condition",
    stops: Callable[[], Iterable[float | None]] = tuple,
    each: Callable[[], object] = lambda: None,
) -> None:
    """Move virtual time timer by timer (and to each of ``stops()``, times the caller wants to
    look at) until ``check()`` holds; ``each()`` (a function or a coroutine function) runs at
    every stop before the check.

    AssertionError naming ``what`` when the next stop is past ``within`` virtual seconds from
    now, or when nothing is left to fire."""
    await clock.settle()
    end = clock.now() + within
    while True:
        looked = each()
        if inspect.isawaitable(looked):
            await looked
        if check():
            return
        now, deadline = clock.now(), clock.next_deadline()
        times = [t for t in stops() if t is not None and t > now] + ([deadline] if deadline is not None else [])
        step = min(times) if times else None
        if step is None or step > end:
            raise AssertionError(f"{_said(what)}: not reached within {within:g} s (virtual t={clock.now():.1f})")
        await clock.advance_to(step)


async def until_answer(
    fetch: Callable[[], Awaitable[T]],
    accept: Callable[[T], object],
    timeout: float = 20.0,
    what: What = "the answer",
    *,
    every: float = 0.05,
) -> T:
    """``fetch()``'s first answer that ``accept`` takes (a request polled until it says what
    the test waits for); the last answer is said when none came within ``timeout``."""
    last: list[T] = []

    async def accepted() -> object:
        last[:] = [await fetch()]
        return accept(last[0])

    await until(accepted, timeout, lambda: f"{_said(what)} (last answer: {last[0] if last else None!r})", every=every)
    return last[0]
