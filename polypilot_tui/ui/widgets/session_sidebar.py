"""The list of sessions; highlighting a row selects that session."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence, Set
from dataclasses import replace

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.hosts import LOCAL, HostView
from polypilot_tui.domain.view import SessionView
from polypilot_tui.ui.formatting import SessionEntry
from polypilot_tui.ui.host_text import HostHeader
from polypilot_tui.ui.team_tree import sidebar_order
from polypilot_tui.ui.widgets.session_list import SessionList

_RowInputs = tuple[SessionView, bool, bool, int, int, bool, bool]
"""What a row is made from besides the time: the view; unread, marked; depth, workers under
it; queued, stale."""


class SessionSidebar(Vertical):
    """A title and one :class:`SessionList` for every session (three widgets however many);
    workers are listed under their orchestrator; with a fleet, each machine's sessions under
    its header (Local first), a machine that stopped answering with its rows dimmed.

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
        self._made: dict[str, tuple[_RowInputs, SessionEntry]] = {}
        """Each session's row as last made, with what it was made from."""

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
        marked: Set[str] = frozenset(),
        queued: Set[str] = frozenset(),
        hosts: Sequence[HostView] = (),
        host_of: Mapping[str, str] | None = None,
        needy: Set[str] = frozenset(),
        wall_now: float = 0.0,
    ) -> None:
        """Bring rows in line with ``views`` (``marked``: the sessions a prompt is broadcast to;
        ``queued``: workers waiting for a slot).

        With ``hosts`` (a fleet), the rows are grouped under each host's header in that order,
        ``host_of`` saying where each session runs, ``needy`` which need the user (counted in
        the headers), ``wall_now`` the time of day of ``now`` (a stale host's "since HH:MM")."""
        entries: list[SessionEntry | HostHeader] = []
        made: dict[str, tuple[_RowInputs, SessionEntry]] = {}
        if not hosts:
            self._add_rows(entries, made, views, now, unread, marked, queued, stale=False)
        else:
            where = host_of or {}
            groups: dict[str, list[SessionView]] = {host.name: [] for host in hosts}
            for view in views:
                name = where.get(view.id, LOCAL)
                groups[name if name in groups else hosts[0].name].append(view)  # a host unlisted: first
            for host in hosts:
                group = groups[host.name]
                needing = sum(1 for view in group if view.id in needy)
                entries.append(HostHeader.of(host, group, needing, now, wall_now))
                self._add_rows(entries, made, group, now, unread, marked, queued, stale=not host.live)
        self._made = made  # the sessions gone are forgotten
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

    def _add_rows(
        self,
        entries: list[SessionEntry | HostHeader],
        made: dict[str, tuple[_RowInputs, SessionEntry]],
        views: Sequence[SessionView],
        now: float,
        unread: set[str],
        marked: Set[str],
        queued: Set[str],
        *,
        stale: bool,
    ) -> None:
        """The rows of ``views``, workers under their orchestrator. A row made from the same
        view and marks as last time is kept (its status line redone: the only part the time
        moves): every redraw of 200 sessions remade every row, three times on an attach."""
        ordered = sidebar_order(views)
        workers = Counter(view.parent for view, depth in ordered if depth)
        for view, depth in ordered:
            sid = view.id
            inputs = (view, sid in unread, sid in marked, depth, workers[sid], sid in queued, stale)
            last = self._made.get(sid)
            if last is not None and last[0] == inputs:
                entry = last[1]
                status = SessionEntry.status_line(view, now, inputs[4], inputs[5])
                if status != entry.status_text:
                    entry = replace(entry, status_text=status)
            else:
                entry = SessionEntry.of(view, now, *inputs[1:])
            made[sid] = (inputs, entry)
            entries.append(entry)

    def on_session_list_highlighted(self, event: SessionList.Highlighted) -> None:
        event.stop()
        self.post_message(self.Picked(event.session_id))

    def on_session_list_selected(self, event: SessionList.Selected) -> None:
        event.stop()
        self.post_message(self.Picked(event.session_id, chosen=True))
