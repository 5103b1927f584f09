"""on_interrupt: a command's ctrl+c / SIGTERM handler, on real signals to this process."""

from __future__ import annotations

import asyncio
import os
import signal

from polypilot_tui.commands.interrupts import on_interrupt
from tests.support.waiting import until


async def test_a_signal_inside_reaches_the_handler_by_name_and_none_after() -> None:
    caught: list[str] = []
    with on_interrupt(caught.append):
        os.kill(os.getpid(), signal.SIGTERM)
        await until(lambda: caught == ["SIGTERM"], 5, "the SIGTERM handed over")
        os.kill(os.getpid(), signal.SIGINT)
        await until(lambda: caught == ["SIGTERM", "SIGINT"], 5, "the SIGINT handed over")
    loop = asyncio.get_running_loop()
    assert not loop.remove_signal_handler(signal.SIGTERM) and not loop.remove_signal_handler(signal.SIGINT)
