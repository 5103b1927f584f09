"""The history half of persistence: chat rows and streaming drafts written to history.db
at most ``delay`` after they change, off the loop, retried with backoff, problems told once.

The draft is the reply streamed so far in the current turn. It is not history yet (that
happens at turn_end), but a kill mid-turn must not lose it (#224): on restore it becomes an
assistant row marked interrupted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import Any

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.records import ItemAdded, ItemReplaced, Record, SessionAdded, SessionRemoved
from polypilot_tui.domain.session import Session
from polypilot_tui.engine.debounced import DebouncedWriter
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.storage.history import HistoryDB, WriteResult
from polypilot_tui.storage.notices import NoticeBoard

log = logging.getLogger(__name__)

FAILING = "history"
"""Notice key of a history database that cannot be written."""


@dataclass
class HistoryBatch:
    """What one write carries: rows by in-memory index, drafts, and deleted sessions."""

    rows: list[tuple[str, int, ChatItem]]
    offsets: dict[str, int | None]
    """Per session: the database index of its in-memory row 0 (None: not known yet)."""
    drafts: dict[str, tuple[str, float] | None]
    deletions: set[str]


class HistoryWriter(DebouncedWriter):
    """Debounced, batched, retried writes of one history database; stops when fenced."""

    def __init__(
        self,
        manager: SessionManager,
        db: HistoryDB,
        io: Executor,
        board: NoticeBoard,
        delay: float,
        on_fenced: Callable[[str], None],
    ) -> None:
        super().__init__(manager.clock, delay)
        self._manager = manager
        self._db = db
        self._io = io
        self._board = board
        self._on_fenced = on_fenced
        self._loop = asyncio.get_running_loop()
        self._offsets: dict[str, int | None] = {}
        self._pending: dict[tuple[str, int], ChatItem] = {}
        self._draft_seen: dict[str, tuple[int, int] | None] = {}
        self._draft_dirty: set[str] = set()
        self._drafts_saved: set[str] = set()
        self._deleted: set[str] = set()
        self._kept: dict[str, int | None] = {}
        """Closed sessions whose rows stayed on disk (not all in memory): their offset, for an undo."""

    # ---- which sessions, which rows ------------------------------------------------------
    def install(self, session: Session, loaded: bool) -> None:
        """Track a restored session (``loaded``: its rows were read, so index 0 is row 0)."""
        self._offsets[session.id] = 0 if loaded else None
        self._draft_dirty.add(session.id)  # clears a stale draft, or saves the one restored

    def install_new(self, session_id: str) -> None:
        """A session that is not on disk yet (new, or reopened after a close): all of its rows
        (those of a close that kept them on disk go back where they were)."""
        if session_id in self._offsets:
            return
        session = self._manager.session(session_id)
        self._offsets[session_id] = self._kept.pop(session_id, 0)
        self._draft_dirty.add(session_id)
        self._queue_held(session)

    def _queue_held(self, session: Session) -> None:
        """Every row the session holds goes at the next write (rows still unread are on disk)."""
        for index, item in session.history.held():
            self._pending[(session.id, index)] = item

    def drafts_restored(self, session_ids: set[str]) -> None:
        """These sessions' drafts became rows at restore: their draft rows go at the next write."""
        self._drafts_saved |= session_ids

    def track(self, change: Record) -> None:
        """Note one change of the stream (on the loop, cheap) and arm the next write."""
        if isinstance(change, (ItemAdded, ItemReplaced)):
            if change.session_id in self._offsets:
                self._pending[(change.session_id, change.index)] = change.item
                self.arm()
        elif isinstance(change, SessionRemoved):
            self._forget(change.session_id, keep_rows=change.rows_kept)
        elif isinstance(change, SessionAdded):
            self.install_new(change.session_id)
            self.arm()  # an undone close brings rows its close deleted: written now, not at quit
        else:
            self._draft_maybe_changed(change.session_id)

    def _draft_maybe_changed(self, session_id: str) -> None:
        try:
            turn = self._manager.session(session_id).turn
        except KeyError:
            return
        seen = (turn.seq, turn.response.changes) if turn is not None else None
        if seen != self._draft_seen.get(session_id):
            self._draft_seen[session_id] = seen
            self._draft_dirty.add(session_id)
            self.arm()

    def _forget(self, session_id: str, keep_rows: bool = False) -> None:
        if session_id not in self._offsets:
            return
        offset = self._offsets.pop(session_id)
        self._draft_seen.pop(session_id, None)
        self._draft_dirty.discard(session_id)
        for key in [k for k in self._pending if k[0] == session_id]:
            del self._pending[key]
        # Rows on disk that are not in memory (unread, or before an unknown or non-zero offset:
        # a restore that could not read them) are kept: deleting them would lose them to an undo.
        if keep_rows or offset != 0:
            self._kept[session_id] = offset
        else:
            self._deleted.add(session_id)
            self.arm()

    def end_undo(self, session_ids: Iterable[str] | None = None) -> None:
        """These closed sessions (None: every one, at quit) can no longer come back: the rows
        kept on disk for their undo are deleted now."""
        ending = list(self._kept) if session_ids is None else [sid for sid in session_ids if sid in self._kept]
        for sid in ending:
            del self._kept[sid]
            self._deleted.add(sid)
        if ending:
            self.arm()

    def reseed(self) -> None:
        """The database was replaced by an empty one: write every live session again."""
        self._drafts_saved.clear()
        for sid in list(self._offsets):
            try:
                session = self._manager.session(sid)
            except KeyError:
                continue
            self._offsets[sid] = 0
            # Unread rows are read from the old file if it still can be; those that cannot are
            # left out (shown as unreadable), never written as placeholders.
            session.history.read_all()
            self._queue_held(session)
            self._draft_dirty.add(sid)

    # ---- writing ------------------------------------------------------------------------
    def take_batch(self) -> HistoryBatch | None:
        """Everything not yet written, taken out of the pending set (None: nothing)."""
        drafts: dict[str, tuple[str, float] | None] = {}
        wall = self._manager.clock.wall()
        for sid in self._draft_dirty:
            try:
                turn = self._manager.session(sid).turn
            except KeyError:
                continue
            text = turn.response_text if turn is not None else ""
            if text.strip():
                drafts[sid] = (text, wall)
            elif sid in self._drafts_saved:
                drafts[sid] = None
        self._draft_dirty.clear()
        if not (self._pending or drafts or self._deleted):
            return None
        rows = [(sid, idx, item) for (sid, idx), item in self._pending.items()]
        offsets = {sid: self._offsets.get(sid) for sid in {r[0] for r in rows}}
        batch = HistoryBatch(rows, offsets, drafts, set(self._deleted))
        self._pending = {}
        self._deleted = set()
        return batch

    @property
    def unsaved(self) -> bool:
        """Rows, drafts or deletions are waiting to be written."""
        return bool(self._pending or self._deleted or self._draft_dirty)

    @property
    def unsaved_rows(self) -> int:
        return len(self._pending)

    def start_write(self) -> asyncio.Future[Any] | None:
        batch = self.take_batch()
        if batch is None:
            return None
        flight = self._loop.run_in_executor(self._io, self._write, batch)
        return self.launch(flight, lambda f: self._landed(batch, f))

    def _write(self, batch: HistoryBatch) -> tuple[WriteResult, dict[str, int]]:
        """On the I/O thread: resolve unknown offsets, then write the batch in one transaction."""
        db = self._db
        resets = db.resets
        resolved: dict[str, int] = {}
        for sid, offset in batch.offsets.items():
            if offset is None:
                found = db.next_index(sid)
                if found is None:
                    return WriteResult.RETRY, {}
                resolved[sid] = found
        rows = [(sid, idx + (batch.offsets[sid] or resolved.get(sid, 0)), item) for sid, idx, item in batch.rows]
        result = db.write(rows, batch.drafts, batch.deletions)
        # A reset anywhere in this batch emptied the database: every session is re-written.
        return (WriteResult.RESET if db.resets != resets else result), resolved

    def _landed(self, batch: HistoryBatch, flight: asyncio.Future[Any]) -> None:
        try:
            result, resolved = flight.result()
        except Exception:  # the I/O thread's result: HistoryDB turns store errors into results, so a bug
            log.exception("history write failed")
            result, resolved = WriteResult.DROPPED, {}
        self.tell_moved()
        if result is WriteResult.FENCED:
            self._keep(batch)
            self.stopped = True
            self._on_fenced(self._db.last_error)
            return
        if result is WriteResult.RETRY:
            self._keep(batch)
            self.tell_failing()
            self.retry_later()
            return
        if result is WriteResult.OK:
            self._board.over(FAILING, f"Chat history is saved again to {self._db.path}.")
            for sid, offset in resolved.items():
                if sid in self._offsets:
                    self._offsets[sid] = offset
                elif sid in self._kept and self._kept[sid] is None:  # closed while this write flew
                    self._kept[sid] = offset
            for sid, draft in batch.drafts.items():
                (self._drafts_saved.add if draft is not None else self._drafts_saved.discard)(sid)
            self.written()
        elif result is WriteResult.RESET:
            self.reseed()
        if self.unsaved:
            self.arm()

    def _keep(self, batch: HistoryBatch) -> None:
        """A batch that was not written goes back to the pending set (newer changes win)."""
        for sid, idx, item in batch.rows:
            if sid in self._offsets:
                self._pending.setdefault((sid, idx), item)
        self._draft_dirty.update(sid for sid in batch.drafts if sid in self._offsets)
        self._deleted.update(batch.deletions)

    # ---- notices ------------------------------------------------------------------------
    def tell_failing(self) -> None:
        self._board.tell(
            FAILING,
            f"Chat history cannot be saved to {self._db.path}: {self._db.last_error}. "
            "New messages are kept in memory and saved as soon as it can be written again.",
        )

    def tell_moved(self) -> None:
        """Say which unreadable files were moved aside (once each)."""
        moved, self._db.moved = self._db.moved, []
        for message in moved:
            self._board.tell(f"moved:{message}", f"{message}.", "warning")
