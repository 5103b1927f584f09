"""Each session's history in a RemoteEngine's mirror: fetched when it is first shown, then kept
up to date by the stream — so attaching to hundreds of sessions moves their views, not their
histories."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.records import ItemAdded, ItemReplaced
from polypilot_tui.engine.api import EngineError
from polypilot_tui.infra.logs import log_failure

log = logging.getLogger(__name__)

RowChange = ItemAdded | ItemReplaced
RETRY_AFTER = 2.0
"""Seconds before a history that could not be fetched is asked for again (then redrawn)."""


class Histories:
    """History rows per session: loaded, loading (stream changes wait), or not asked for yet."""

    def __init__(
        self, fetch: Callable[[str], Awaitable[list[ChatItem]]], loaded: Callable[[str], None], clock: Clock
    ) -> None:
        self._fetch = fetch
        self._loaded = loaded
        self._clock = clock
        self._rows: dict[str, list[ChatItem]] = {}
        self._waiting: dict[str, list[RowChange]] = {}
        """Sessions being fetched, and the stream's row changes that came meanwhile."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._retry_at: dict[str, float] = {}
        """Sessions whose fetch failed: not asked for again before this loop time."""

    def put(self, session_id: str, rows: list[ChatItem] | None) -> None:
        """The session's rows as the engine sent them (None: not sent, fetched when asked for)."""
        self._waiting.pop(session_id, None)
        if rows is None:
            self._rows.pop(session_id, None)
        else:
            self._rows[session_id] = rows

    def forget(self, session_id: str) -> None:
        self._rows.pop(session_id, None)
        self._waiting.pop(session_id, None)
        self._retry_at.pop(session_id, None)

    def get(self, session_id: str) -> tuple[ChatItem, ...]:
        """The rows so far; a history not here yet is fetched (the ``loaded`` callback says when)."""
        rows = self._rows.get(session_id)
        if rows is not None:
            return tuple(rows)
        if session_id not in self._waiting and self._clock.now() >= self._retry_at.get(session_id, 0.0):
            self._waiting[session_id] = []
            task = asyncio.get_running_loop().create_task(self._load(session_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return ()

    def apply(self, change: RowChange) -> None:
        """A row added or replaced, by its index: rows already there are replaced, never doubled."""
        waiting = self._waiting.get(change.session_id)
        if waiting is not None:
            waiting.append(change)
        elif (rows := self._rows.get(change.session_id)) is not None:
            _fold(rows, change)

    async def _load(self, session_id: str) -> None:
        try:
            rows = await self._fetch(session_id)
        except Exception as exc:  # noqa: BLE001 - a task's top: asked for again, once, after RETRY_AFTER
            log_failure(log, f"the fetch of the history of {session_id}", exc, (EngineError, OSError, ValueError))
            if self._waiting.pop(session_id, None) is not None:
                retry = self._retry_at[session_id] = self._clock.now() + RETRY_AFTER
                self._clock.call_at(retry, lambda: self._loaded(session_id))  # its redraw asks again
            return
        self._retry_at.pop(session_id, None)
        waiting = self._waiting.pop(session_id, None)
        if waiting is None:
            return  # closed, or sent whole, meanwhile
        for change in waiting:  # the fetch answered at some point among these: fold by index
            if change.index <= len(rows):
                _fold(rows, change)
        self._rows[session_id] = rows
        self._loaded(session_id)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def _fold(rows: list[ChatItem], change: RowChange) -> None:
    if change.index < len(rows):
        rows[change.index] = change.item
    elif change.index == len(rows):
        rows.append(change.item)
    else:
        raise ValueError(f"history row {change.index} of {change.session_id} arrived before row {len(rows)}")
