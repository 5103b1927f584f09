"""Each session's history in a RemoteEngine's mirror: the rows from some index to the end,
kept up to date by the stream — so attaching to hundreds of sessions moves their views, not
their histories, and showing a long chat moves its last page, not all of it.

A session's window starts with the page the dashboard read first (or the whole history, when
somebody asks for all of it); pages read above it are joined to it, so a row replaced there
later (a long turn's tool completing) is replaced in the mirror too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from polypilot_tui.domain.changes import ItemAdded, ItemReplaced
from polypilot_tui.domain.chat import ChatItem, HistoryPage
from polypilot_tui.engine.api import EngineError
from polypilot_tui.service.client import EngineHttp
from polypilot_tui.service.wire import items_from_json

log = logging.getLogger(__name__)

RowChange = ItemAdded | ItemReplaced
PAGE_LIMIT = 1000
"""The most rows the engine sends per history request."""


@dataclass
class Window:
    """Rows ``start`` .. the end of one session's history."""

    start: int
    rows: list[ChatItem] = field(default_factory=list)

    @property
    def end(self) -> int:
        return self.start + len(self.rows)

    def page(self, start: int, stop: int | None = None) -> HistoryPage:
        first = max(start, self.start)
        end = self.end if stop is None else min(stop, self.end)
        rows = self.rows[first - self.start : end - self.start] if end > first else []
        return HistoryPage(first, tuple(rows), self.end)

    def fold(self, change: RowChange) -> None:
        """A row added or replaced, by its index: rows already there are replaced, never doubled."""
        at = change.index - self.start
        if at < 0:
            return  # above the window: nobody shows it from here
        if at < len(self.rows):
            self.rows[at] = change.item
        elif at == len(self.rows):
            self.rows.append(change.item)
        else:
            raise ValueError(f"history row {change.index} of {change.session_id} arrived before row {self.end}")


class Histories:
    """History windows per session: held, being fetched (stream changes wait), or not asked for yet."""

    def __init__(self, api: Callable[[], EngineHttp], loaded: Callable[[str], None]) -> None:
        self._api = api
        self._loaded = loaded
        self._windows: dict[str, Window] = {}
        self._waiting: dict[str, list[RowChange]] = {}
        """Sessions being fetched, and the stream's row changes that came meanwhile."""
        self._tasks: set[asyncio.Task[None]] = set()

    def put(self, session_id: str, rows: list[ChatItem] | None) -> None:
        """The session's rows as the engine sent them (None: not sent, fetched when asked for)."""
        self._waiting.pop(session_id, None)
        if rows is None:
            self._windows.pop(session_id, None)
        else:
            self._windows[session_id] = Window(0, rows)

    def forget(self, session_id: str) -> None:
        self._windows.pop(session_id, None)
        self._waiting.pop(session_id, None)

    def get(self, session_id: str) -> tuple[ChatItem, ...]:
        """Every row; a history not all here yet is fetched (the ``loaded`` callback says when)
        and what is here so far is answered meanwhile."""
        window = self._windows.get(session_id)
        if window is not None and window.start == 0:
            return tuple(window.rows)
        if session_id not in self._waiting:
            self._waiting[session_id] = []
            task = asyncio.get_running_loop().create_task(self._load(session_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return tuple(window.rows) if window is not None else ()

    def tail(self, session_id: str, start: int, total: int) -> HistoryPage:
        """The rows held from ``start`` on (none held: an empty page at ``total``)."""
        window = self._windows.get(session_id)
        return window.page(start) if window is not None else HistoryPage(total, (), total)

    def held(self, session_id: str, start: int, stop: int) -> HistoryPage | None:
        """Rows ``start <= index < stop`` when all of them are held, else None."""
        window = self._windows.get(session_id)
        if window is None or start < window.start:
            return None
        return window.page(start, stop)

    def seeding(self, session_id: str) -> bool:
        """About to read a page of a session nothing is held of: stream changes wait for it."""
        if session_id in self._windows or session_id in self._waiting:
            return False
        self._waiting[session_id] = []
        return True

    def read(self, session_id: str, page: HistoryPage, seeding: bool) -> None:
        """A page read from the engine: it starts the window (``seeding``) or joins it above."""
        if seeding:
            waiting = self._waiting.pop(session_id, None)
            if waiting is None:
                return  # closed, or sent whole, meanwhile
            window = self._windows[session_id] = Window(page.start, list(page.items))
            for change in waiting:  # the read answered at some point among these: fold by index
                if change.index <= window.end:
                    window.fold(change)
            return
        held = self._windows.get(session_id)
        if held is not None and page.items and page.stop == held.start:
            held.rows[:0] = page.items
            held.start = page.start

    def abandon(self, session_id: str) -> None:
        """A seeding read failed: nothing is held, changes no longer wait."""
        self._waiting.pop(session_id, None)

    def apply(self, change: RowChange) -> None:
        """A row added or replaced (see :meth:`Window.fold`)."""
        waiting = self._waiting.get(change.session_id)
        if waiting is not None:
            waiting.append(change)
        elif (window := self._windows.get(change.session_id)) is not None:
            window.fold(change)

    async def page(self, session_id: str, start: int, stop: int) -> HistoryPage:
        """Rows ``start <= index < stop``: held ones at once, others read from the engine."""
        start = max(0, start)
        held = self.held(session_id, start, stop)
        if held is not None:
            return held
        seeding = self.seeding(session_id)
        try:
            page = await self._read_page(session_id, start, stop)
        except BaseException:
            if seeding:
                self.abandon(session_id)
            raise
        self.read(session_id, page, seeding)
        return page

    async def _read_page(self, session_id: str, start: int, stop: int) -> HistoryPage:
        got = await self._api().get(f"/sessions/{session_id}/history", start=start, limit=max(0, stop - start))
        items = items_from_json(got.get("items") if isinstance(got, dict) else None)
        total = got.get("total") if isinstance(got, dict) else None
        if not isinstance(total, int):
            raise EngineError("the engine answered a history page without its total")
        return HistoryPage(start, tuple(items[: max(0, stop - start)]), total)

    async def _fetch_all(self, session_id: str) -> list[ChatItem]:
        rows: list[ChatItem] = []
        while True:
            page = await self._read_page(session_id, len(rows), len(rows) + PAGE_LIMIT)
            rows += page.items
            if not page.items or len(rows) >= page.total:
                return rows

    async def _load(self, session_id: str) -> None:
        try:
            rows = await self._fetch_all(session_id)
        except Exception as exc:  # noqa: BLE001 - asked for again at the next draw
            log.warning("the history of %s could not be fetched: %s", session_id, exc)
            self._waiting.pop(session_id, None)
            return
        waiting = self._waiting.pop(session_id, None)
        if waiting is None:
            return  # closed, or sent whole, meanwhile
        window = self._windows[session_id] = Window(0, rows)
        for change in waiting:  # the fetch answered at some point among these: fold by index
            if change.index <= window.end:
                window.fold(change)
        self._loaded(session_id)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
