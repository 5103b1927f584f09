"""The list of sessions; highlighting a row selects that session."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import ListView, Static

from polypilot_tui.core.view import SessionView
from polypilot_tui.ui.widgets.session_row import SessionRow


FIRST_SCREENFUL = 30


class SessionSidebar(Vertical):
    """Rows for every session, added, updated and removed in place."""

    BINDINGS = [
        Binding("s", "app.stop", "Stop", id="sidebar.stop"),
        Binding("r", "app.reconnect", "Reconnect", id="sidebar.reconnect"),
    ]

    @dataclass
    class Picked(Message):
        """The user moved the highlight to a session."""

        session_id: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._title = Static("Sessions", classes="sidebar-title", markup=False)
        self._list = ListView(classes="session-list")
        self._rows: dict[str, SessionRow] = {}
        self._unmounted: list[SessionRow] = []
        """Rows created but not yet mounted: a restore of hundreds of sessions mounts the
        first screenful at once and the rest after the first frame."""

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._list

    @property
    def list_view(self) -> ListView:
        return self._list

    @property
    def highlighted(self) -> str | None:
        """The session of the highlighted row, now (messages about it may be stale)."""
        item = self._list.highlighted_child
        return item.session_id if isinstance(item, SessionRow) else None

    async def sync(self, views: Sequence[SessionView], now: float, unread: set[str], selected: str | None,
                   changed: set[str] | None = None) -> None:
        """Bring rows in line with ``views`` (``changed``: only these need a redraw; None = all)."""
        wanted = [v.id for v in views]
        for sid in [sid for sid in self._rows if sid not in wanted]:
            row = self._rows.pop(sid)
            if row.is_mounted:
                await row.remove()
        new_rows: list[SessionRow] = []
        for view in views:
            row = self._rows.get(view.id)
            if row is None:
                row = self._rows[view.id] = SessionRow(view, now, view.id in unread)
                new_rows.append(row)
            elif changed is None or view.id in changed:
                row.show(view, now, view.id in unread)
        if new_rows:
            await self._mount_rows(new_rows)
        busy = sum(1 for v in views if v.status.busy)
        self._title.update(f"Sessions ({len(views)})" + (f" · {busy} busy" if busy else ""))
        if selected is not None and selected in wanted:
            index = wanted.index(selected)
            if self._list.index != index:
                self._list.index = index

    async def _mount_rows(self, rows: list[SessionRow]) -> None:
        if self._unmounted:  # keep the order: these go after rows still waiting
            self._unmounted.extend(rows)
            return
        now, later = rows[:FIRST_SCREENFUL], rows[FIRST_SCREENFUL:]
        await self._list.extend(now)
        if later:
            self._unmounted = later
            self.call_after_refresh(self._mount_rest)

    async def _mount_rest(self) -> None:
        rows, self._unmounted = self._unmounted, []
        rows = [row for row in rows if row.session_id in self._rows]  # closed meanwhile
        if rows:
            await self._list.extend(rows)

    def on_list_view_highlighted(self, event: ListView.Highlighted) -> None:
        event.stop()
        item = event.item
        if isinstance(item, SessionRow):
            self.post_message(self.Picked(item.session_id))

    def on_list_view_selected(self, event: ListView.Selected) -> None:
        event.stop()
        if isinstance(event.item, SessionRow):
            self.post_message(self.Picked(event.item.session_id))
