"""When a store is written: at most ``delay`` after a change, one write in flight at a time,
retried with a doubling backoff while the store fails, and never again once stopped.

The history and the registry writers share this timing; each says what one write is. Files
rewritten whole from a snapshot (the teams, the fan-out groups) use :class:`SnapshotWriter`. Timers
run on the engine's clock, so tests drive the debounce in virtual time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from polypilot_tui.domain.clock import Clock, TimerHandle
from polypilot_tui.storage.notices import NoticeBoard

T = TypeVar("T")

MAX_RETRY_DELAY = 5.0
"""The longest wait between two tries of a store that keeps failing (seconds)."""
MIN_RETRY_DELAY = 0.2
"""The shortest: a writer with no debounce must not retry a failing disk in a tight loop."""


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
        wait = self._delay if delay is None else delay
        if wait <= 0:  # no debounce: the next turn of the loop (there is no time to drive)
            self._timer = asyncio.get_running_loop().call_soon(self._due)
            return
        self._timer = self._clock.call_at(self._clock.now() + wait, self._due)

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
        self._backoff = min(MAX_RETRY_DELAY, max(MIN_RETRY_DELAY, self._backoff * 2))
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


class SnapshotWriter(DebouncedWriter, Generic[T]):
    """A whole file rewritten from a snapshot taken when the write starts, in a thread (a big
    file never stalls the loop), the changes made meanwhile in the next write. A failure is
    told on the notice board under ``key`` and retried; the first success after says so."""

    def __init__(
        self,
        clock: Clock,
        snapshot: Callable[[], T],
        write: Callable[[T], None],
        board: NoticeBoard,
        key: str,
        what: str,
        where: Path,
        delay: float = 0.0,
    ) -> None:
        super().__init__(clock, delay)
        self._snapshot = snapshot
        self._write = write
        self._board = board
        self._key = key
        self._what = what
        """What is saved, for people: "The teams", "The fan-out groups"."""
        self._where = where
        self._changed = False

    def changed(self) -> None:
        """Something the snapshot holds changed: write it soon."""
        self._changed = True
        self.arm()

    def start_write(self) -> asyncio.Future[Any] | None:
        if self.stopped or not self._changed:
            return None
        self._changed = False
        data = self._snapshot()
        flight = asyncio.ensure_future(asyncio.to_thread(self._write, data))
        return self.launch(flight, self._landed)

    def _landed(self, flight: asyncio.Future[Any]) -> None:
        error = OSError("cancelled") if flight.cancelled() else flight.exception()
        if error is not None:
            self._board.tell(self._key, f"{self._what} could not be saved to {self._where}: {error}", "error")
            self._changed = True
            self.retry_later()
            return
        self._board.over(self._key, f"{self._what} are saved to {self._where} again.")
        self.written()
        if self._changed:
            self.arm()
