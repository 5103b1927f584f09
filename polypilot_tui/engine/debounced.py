"""When a store is written: at most ``delay`` after a change, one write in flight at a time,
retried with a doubling backoff while the store fails, and never again once stopped.

The history and the registry writers share this timing; each says what one write is. Timers
run on the engine's clock, so tests drive the debounce in virtual time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from polypilot_tui.domain.clock import Clock, TimerHandle

MAX_RETRY_DELAY = 5.0
"""The longest wait between two tries of a store that keeps failing (seconds)."""


class DebouncedWriter:
    """The timing half of a store's writer; subclasses implement :meth:`start_write`."""

    def __init__(self, clock: Clock, delay: float) -> None:
        self._clock = clock
        self._delay = delay
        self._backoff = delay
        self._timer: TimerHandle | None = None
        self._flight: asyncio.Future[Any] | None = None
        self.stopped = False
        """Closed or fenced: nothing more is written."""

    def start_write(self) -> asyncio.Future[Any] | None:
        """Begin one write (see :meth:`launch`); None when there is nothing to write."""
        raise NotImplementedError

    def arm(self, delay: float | None = None) -> None:
        """Write within ``delay`` (the debounce) unless a write is already due or flying."""
        if self.stopped or self._timer is not None or self._flight is not None:
            return  # a flight in progress re-arms when it lands
        self._timer = self._clock.call_at(self._clock.now() + (self._delay if delay is None else delay), self._due)

    def _due(self) -> None:
        self._timer = None
        if not self.stopped:
            self.start_write()

    def launch(self, flight: asyncio.Future[Any], landed: Callable[[asyncio.Future[Any]], None]) -> asyncio.Future[Any]:
        """Track ``flight`` as the write in progress; ``landed`` runs when it ends."""
        self._flight = flight

        def done(finished: asyncio.Future[Any]) -> None:
            self._flight = None
            landed(finished)

        flight.add_done_callback(done)
        return flight

    def retry_later(self) -> None:
        """The write failed: try again after a doubled wait."""
        self._backoff = min(MAX_RETRY_DELAY, self._backoff * 2)
        self.arm(self._backoff)

    def written(self) -> None:
        """The write succeeded: the next failure starts its backoff afresh."""
        self._backoff = self._delay

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def flush(self) -> None:
        """Write everything now and wait for it."""
        for _ in range(3):  # a flight in progress may have left more behind
            self._cancel_timer()
            if self._flight is not None:
                await asyncio.wait([self._flight])
                continue
            if self.stopped:
                break
            flight = self.start_write()
            if flight is None:
                break
            await asyncio.wait([flight])

    def stop(self) -> None:
        """No more writes (the app is quitting, or another app took the folder over)."""
        self.stopped = True
        self._cancel_timer()
