"""The list of sessions; highlighting a row selects that session."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence, Set
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from polypilot_tui.domain.view import SessionView
from polypilot_tui.ui.formatting import SessionEntry
from polypilot_tui.ui.team_tree import sidebar_order
from polypilot_tui.ui.widgets.session_list import SessionList


class SessionSidebar(Vertical):
    """A title and one :class:`SessionList` for every session (three widgets however many);
    workers are listed under their orchestrator.

    It has no single-letter keys of its own: a click moves the focus here, and letters
    typed next must never stop or reconnect a session (they go to the prompt instead).
    """

    @dataclass
    class Picked(Message):
        """The user moved the highlight to a session (``chosen``: by click or Enter)."""

        session_id: str
        chosen: bool = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._title = Static("Sessions", classes="sidebar-title", markup=False)
        self._list = SessionList(classes="session-list")

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._list

    @property
    def session_list(self) -> SessionList:
        """The rows (one line-rendered widget)."""
        return self._list

    @property
    def highlighted(self) -> str | None:
        """The session of the highlighted row, now (messages about it may be stale)."""
        return self._list.highlighted_id

    async def sync(
        self,
        views: Sequence[SessionView],
        now: float,
        unread: set[str],
        selected: str | None,
        changed: set[str] | None = None,
        marked: Set[str] = frozenset(),
        queued: Set[str] = frozenset(),
    ) -> None:
        """Bring rows in line with ``views`` (``changed``: only these need a redraw; None = all;
        ``marked``: the sessions a prompt is broadcast to; ``queued``: workers waiting for a slot)."""
        entries: list[SessionEntry] = []
        ordered = sidebar_order(views)
        workers = Counter(view.parent for view, depth in ordered if depth)
        for view, depth in ordered:
            entry = self._list.entry(view.id) if changed is not None and view.id not in changed else None
            if entry is None or (entry.marked, entry.depth) != (view.id in marked, depth):
                entry = SessionEntry.of(
                    view, now, view.id in unread, view.id in marked, depth, workers[view.id], view.id in queued
                )
            entries.append(entry)
        self._list.set_entries(entries)
        busy = sum(1 for v in views if v.status.busy)
        marks = sum(1 for v in views if v.id in marked)
        title = (
            f"Sessions ({len(views)})" + (f" · {busy} busy" if busy else "") + (f" · {marks} marked" if marks else "")
        )
        if title != self._title.content:
            self._title.update(title)
        if selected is not None:
            self._list.highlight(selected)

    def on_session_list_highlighted(self, event: SessionList.Highlighted) -> None:
        event.stop()
        self.post_message(self.Picked(event.session_id))

    def on_session_list_selected(self, event: SessionList.Selected) -> None:
        event.stop()
        self.post_message(self.Picked(event.session_id, chosen=True))
