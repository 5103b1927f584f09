"""`within`: a time limit on the one clock (virtual in tests), like asyncio.wait_for."""

from __future__ import annotations

import asyncio

import pytest

from polypilot_tui.domain.clock import FakeClock, within


async def test_a_result_within_the_limit_is_returned() -> None:
    clock = FakeClock()

    async def answer() -> int:
        await clock.sleep(2)
        return 42

    waiting = asyncio.ensure_future(within(clock, answer(), 3))
    await clock.advance(2)
    assert waiting.done() and waiting.result() == 42
    assert clock.next_deadline() is None  # the limit's timer is gone with it


async def test_the_limit_runs_on_the_clock_and_gives_up_on_the_awaitable() -> None:
    clock = FakeClock()
    hung: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(within(clock, hung, 5))
    await asyncio.sleep(0.05)  # real time does not count
    await clock.advance(4.9)
    assert not waiting.done()
    await clock.advance(0.1)
    assert isinstance(waiting.exception(), TimeoutError)
    assert hung.cancelled()


async def test_a_failure_is_raised_as_it_is() -> None:
    clock = FakeClock()

    async def fail() -> None:
        raise ConnectionError("gone")

    with pytest.raises(ConnectionError, match="gone"):
        await within(clock, fail(), 5)


async def test_cancelling_the_wait_cancels_what_it_waits_for() -> None:
    clock = FakeClock()
    hung: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(within(clock, hung, 5))
    await clock.settle()
    waiting.cancel()
    await clock.settle()
    assert waiting.cancelled() and hung.cancelled() and clock.next_deadline() is None
