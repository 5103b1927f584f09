"""Reading restored sessions' saved rows into memory in the background, a page at a time.

A restore leaves chat rows on disk so the first frame does not wait for them
(domain/history.py). Soon after, this reads them in, one page (~a millisecond) per loop
turn, so that everything is held in memory again as before: a history.db damaged or replaced
later cannot take rows the app has not read, and nothing waits on the disk when a session
is shown, searched or closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.clock import TimerHandle
from polypilot_tui.domain.history import History
from polypilot_tui.engine.manager import SessionManager

log = logging.getLogger(__name__)

START_AFTER = 1.0
"""Seconds after the restore: the dashboard draws its first frames first."""
RETRY_AFTER = 5.0
"""Seconds before trying again when the disk could not be read."""


class ReadAhead:
    """Reads every restored session's saved rows, newest first, yielding to the loop between pages."""

    def __init__(self, manager: SessionManager) -> None:
        self._manager = manager
        self._clock = manager.clock
        self._waiting: list[str] = []
        self._timer: TimerHandle | None = None

    def start(self, session_ids: list[str], delay: float = START_AFTER) -> None:
        """Read these sessions' rows, beginning ``delay`` seconds from now."""
        self._waiting = list(reversed(session_ids))  # popped from the end: the list's order
        self._schedule(delay)

    def add(self, session_id: str) -> None:
        """Read this session's rows too (a closed session brought back), unless all are read."""
        try:
            unread = self._manager.session(session_id).history.unread
        except KeyError:
            return
        if unread and session_id not in self._waiting:
            self._waiting.append(session_id)
            if self._timer is None:
                self._schedule(0.0)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting = []

    @property
    def done(self) -> bool:
        return not self._waiting

    def _schedule(self, delay: float) -> None:
        self._timer = self._clock.call_at(self._clock.now() + delay, self._step)

    def _step(self) -> None:
        """One page of the next session that still has unread rows. A read that fails ends the
        round (one failing file must not cost a query per session): that session goes to the
        back of the queue, so the next round begins with another one."""
        self._timer = None
        while self._waiting:
            sid = self._waiting[-1]
            try:
                history = self._manager.session(sid).history
            except KeyError:  # closed meanwhile (its rows were read then)
                self._waiting.pop()
                continue
            if not history.unread:
                self._waiting.pop()
                continue
            if history.read_more():
                self._schedule(0.0)
            else:
                self._waiting.insert(0, self._waiting.pop())
                log.info("saved chat rows could not be read now; trying again in %.0f s", RETRY_AFTER)
                self._schedule(RETRY_AFTER)
            return


async def read_in(items: Sequence[ChatItem], down_to: int = 0) -> bool:
    """Saved rows from ``down_to`` on read from disk a page at a time, the loop serving others
    between pages (20,000 rows in one query held it ~90 ms); False when some cannot be read now."""
    if not isinstance(items, History):
        return True
    while items.unread > down_to and items.read_more():
        await asyncio.sleep(0)
    return items.unread <= down_to
