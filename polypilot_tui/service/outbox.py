"""One attached client's outgoing records: in order, coalesced, and bounded.

Records wait here between the engine's loop step that made them and the moment the client's
connection takes more (a reading client empties it at every step; one that stops reading —
a suspended ``polypilot follow``, a dashboard stopped with ctrl+z — does not). What a later
record makes stale is not kept twice:

- a session's view is a marker, built when sent (the latest), moved behind whatever was queued
  after the last one (a client never sees a turn over before its rows);
- a history row replaced again before it was sent is queued once, with its latest content;
- consecutive reply deltas of one message are one event, their text joined when sent.

And however long the client does not read, the outbox holds at most ``max_bytes`` (text, and
an estimate of each record's own cost: the engine's ``stream_client_backlog_bytes`` setting)
and :data:`MAX_RECORDS`: past either it drops everything and says so once
(:attr:`Outbox.overflowed`); the client is then sent a fresh snapshot in place of what it missed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any

from polypilot_tui.domain.dataclass_on_use import dataclass

MAX_RECORDS = 20_000
"""How many records one client may have waiting."""
RECORD_COST = 64
"""An estimate of what one waiting record or text piece costs besides its text (bytes)."""

Key = tuple[str, int]
"""A history row: (session id, index)."""


@dataclass
class Frame:
    """A record already in its wire form."""

    text: str


@dataclass
class Marker:
    """A record built when it is sent: ``view``, ``session`` (added) or ``removed``."""

    kind: str
    session_id: str


@dataclass
class Deltas:
    """Consecutive deltas of one agent event type whose other fields are equal: one event."""

    type: str
    base: dict[str, Any]
    """The event's data without its ``deltaContent``."""
    pieces: list[str] = field(default_factory=list)


Entry = Frame | Marker | Deltas


class Outbox:
    """Records waiting for one client, in order, coalesced and bounded (see the module)."""

    def __init__(self, max_bytes: int, max_records: int = MAX_RECORDS) -> None:
        self.max_bytes = max_bytes
        self.max_records = max_records
        self._entries: list[Entry | None] = []
        """None: a view moved behind later records."""
        self._views: dict[str, int] = {}
        """Where each session's waiting view marker is."""
        self._rows: dict[Key, tuple[int, bool]] = {}
        """Where each history row still waiting is, and whether it was queued as added."""
        self.bytes = 0
        self.records = 0
        self.news = 0
        """Waiting records that are not a view or a reply's deltas (rows, turn ends, tool events,
        notices…): those a client should have at once, where a stream may wait for its frame."""
        self.overflowed = ""
        """Why the outbox gave up (empty while it has not): it holds and takes nothing then."""

    def __bool__(self) -> bool:
        return bool(self.records or self.overflowed)

    # ---- putting ---------------------------------------------------------------------------
    def frame(self, text: str) -> None:
        """A record in its wire form."""
        if not self.overflowed:
            self._entries.append(Frame(text))
            self.news += 1
            self._count(len(text))

    def row(self, key: Key, added: bool, encode: Callable[[bool], str]) -> None:
        """A history row added or replaced; ``encode(added)`` is its frame as an added or a
        replaced row. A replacement of a row that has not gone out yet takes that frame's place,
        with the kind it was queued as (a row added and replaced before it was sent is sent
        once, as added, with its latest content)."""
        if self.overflowed:
            return
        waiting = self._rows.get(key) if not added else None
        if waiting is not None:
            at, queued_as_added = waiting
            entry = self._entries[at]
            assert isinstance(entry, Frame)
            text = encode(queued_as_added)
            self.bytes += len(text) - len(entry.text)
            entry.text = text
            self._check()
            return
        self._rows[key] = (len(self._entries), added)
        text = encode(added)
        self._entries.append(Frame(text))
        self.news += 1
        self._count(len(text))

    def marker(self, kind: str, session_id: str) -> None:
        """A record built when sent (``session``, ``removed``)."""
        if not self.overflowed:
            self._entries.append(Marker(kind, session_id))
            self.news += 1
            self._count(0)

    def view(self, session_id: str) -> None:
        """The session's view changed: one view, sent after everything queued before now."""
        if self.overflowed:
            return
        at = self._views.get(session_id)
        if at is not None:
            if at == len(self._entries) - 1:
                return  # already last: nothing came after it
            self._entries[at] = None
            self.records -= 1
        self._views[session_id] = len(self._entries)
        self._entries.append(Marker("view", session_id))
        self._count(0)

    def delta(self, kind: str, base: dict[str, Any], text: str) -> None:
        """An agent's delta event: joined to the one before when that is of the same kind."""
        if self.overflowed:
            return
        last = self._entries[-1] if self._entries else None
        if isinstance(last, Deltas) and last.type == kind and last.base == base:
            last.pieces.append(text)
            self.bytes += len(text) + RECORD_COST
            self._check()
            return
        self._entries.append(Deltas(kind, base, [text]))
        self._count(len(text) + len(kind) + sum(len(str(k)) + len(str(v)) for k, v in base.items()))

    # ---- taking ----------------------------------------------------------------------------
    def take(self) -> list[Entry]:
        """Everything waiting, in order; the outbox is empty after (and may take records again)."""
        entries = [e for e in self._entries if e is not None]
        self._reset()
        self.overflowed = ""
        return entries

    # ---- the bound -------------------------------------------------------------------------
    def _count(self, size: int) -> None:
        self.records += 1
        self.bytes += size + RECORD_COST
        self._check()

    def _check(self) -> None:
        if self.bytes > self.max_bytes or self.records > self.max_records:
            self.overflowed = (
                f"the client did not read: {self.records} records ({self.bytes >> 10} KiB) were waiting, "
                f"more than the {self.max_records} records or {self.max_bytes >> 10} KiB one client may have"
            )
            self._reset()

    def _reset(self) -> None:
        self._entries = []
        self._views.clear()
        self._rows.clear()
        self.bytes = self.records = self.news = 0
