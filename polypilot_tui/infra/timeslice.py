"""A share of the loop: work that runs step by step gives the loop back once it has held it
for a slice, so one busy source cannot keep everything else waiting.

An agent that floods its pipe is the case: a stream reader's ``readline`` returns at once
while lines are buffered, so without a pause the reader would take every buffered line (a
quarter of a megabyte per read, thousands of updates) in one step of the loop, while requests,
other sessions and attached clients wait. Real time (not the engine's clock): the slice
measures how long the loop is held, which virtual time cannot.
"""

from __future__ import annotations

import asyncio
import time

SLICE = 0.002
"""Seconds one source may hold the loop before it lets the others run."""


class TimeSlice:
    """Call :meth:`share` between steps: it yields to the loop once a slice is used up."""

    __slots__ = ("_seconds", "_since")

    def __init__(self, seconds: float = SLICE) -> None:
        self._seconds = seconds
        self._since = time.perf_counter()

    async def share(self) -> None:
        """Let the loop run everything else that is ready, if this source has had its slice.

        (After a natural wait the slice is stale, and the first step yields once: harmless.)"""
        if time.perf_counter() - self._since >= self._seconds:
            await asyncio.sleep(0)
            self._since = time.perf_counter()
