"""Sessions survive a restart: glue between the SessionManager and the store.

``attach_persistence(manager, settings)`` restores the saved sessions (lazily: no agent starts
unless a turn was in flight), then keeps the registry and the chat history written through
while the app runs, and records every session's event stream. All file and database I/O
runs on one worker thread; the loop only takes snapshots and arms short timers:

- registry: at most ``registry_delay`` (0.5 s) after any change, atomically;
- history: rows and the streaming draft at most ``history_delay`` (0.2 s) after they change.

The draft is the reply streamed so far in the current turn. It is not history yet (that
happens at turn_end), but a kill mid-turn must not lose it (#224): on restore it becomes an
assistant row marked interrupted.

Saves never fail silently: every problem (a store that cannot be written, a file moved
aside, another app taking the folder over) becomes one :class:`Notice` the UI shows once,
with the reason and the path, and another when it is over. What could not be written stays
in memory and is retried; what is still unsaved at quit is spilled (storage/spill.py) and
written back at the next start. The state folder's lock is held from start to close.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from polypilot_tui.config import Settings
from polypilot_tui.domain.changes import Change, ItemAdded, ItemReplaced, SessionAdded, SessionRemoved, ViewChanged
from polypilot_tui.domain.session import ChatItem, Session
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.registry_sync import RegistryWriter, session_records
from polypilot_tui.engine.recorder import Recorder
from polypilot_tui.engine.restore import RestoreResult, restore_sessions
from polypilot_tui.storage.history import WriteResult
from polypilot_tui.storage.lock import StateLock
from polypilot_tui.storage.notices import Notice, NoticeBoard, NoticeListener, Severity
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.storage.spill import Spill, write_spill
from polypilot_tui.storage.store import Store

log = logging.getLogger(__name__)

MAX_RETRY_DELAY = 5.0
CLOSE_TIMEOUT = 10.0

QUIT_NOTES: list[str] = []
"""What the user must read after the dashboard has left the terminal (unsaved data at quit);
the CLI prints and clears it."""


@dataclass
class _Batch:
    rows: list[tuple[str, int, ChatItem]]
    offsets: dict[str, int | None]
    drafts: dict[str, tuple[str, float] | None]
    deletions: set[str]


class Persistence:
    """Keeps the registry, history and recordings in step with a SessionManager."""

    def __init__(self, manager: SessionManager, settings: Settings, *, registry_delay: float = 0.5,
                 history_delay: float = 0.2) -> None:
        self.manager = manager
        self.settings = settings
        self.registry_delay = registry_delay
        self.history_delay = history_delay
        self._loop = asyncio.get_running_loop()
        # One writer per state folder: raises StateFolderBusy when another app holds it.
        self.lock: StateLock | None = StateLock.acquire(Path(settings.state_dir))
        REDACTOR.learn_environment()
        REDACTOR.learn_agents(manager.catalog.agents.values())
        self.store = Store(Path(settings.state_dir), owner=uuid.uuid4().hex)
        self.recorder: Recorder | None = None
        if settings.record:
            self.recorder = Recorder(self.store.state_dir / "recordings", manager.clock, settings.record_max_bytes)
        self._io = ThreadPoolExecutor(1, thread_name_prefix="polypilot-store")
        self._offsets: dict[str, int | None] = {}
        """Per hooked session: its in-memory index 0 is this database index (None: not known yet)."""
        self._pending: dict[tuple[str, int], ChatItem] = {}
        self._draft_seen: dict[str, tuple[int, int] | None] = {}
        self._draft_dirty: set[str] = set()
        self._drafts_saved: set[str] = set()
        self._deleted: set[str] = set()
        self._history_timer: asyncio.TimerHandle | None = None
        self._history_flight: asyncio.Future[Any] | None = None
        self._history_backoff = history_delay
        self._unsubscribe: Callable[[], None] | None = None
        self._closed = False
        self._fenced = False
        """Another app took the state folder over: nothing more is written."""
        self.board = NoticeBoard()
        self.registry = RegistryWriter(manager, self.store.registry, self._io, self.board, registry_delay, self._fence)
        self.restored = RestoreResult()

    # ---- start ----------------------------------------------------------------------
    def start(self) -> RestoreResult:
        """Restore saved sessions, then watch the manager (call once, on the loop)."""
        if self.store.problem:
            self._tell("folder", f"Nothing can be saved: {self.store.problem}.")
        for message in self.store.recover_spills():
            self._tell(f"spill:{message}", message, "information")
        if self.recorder is not None:  # before the restore: restored sessions start with a restore line
            self.recorder.attach(self.manager)
        self._unsubscribe = self.manager.subscribe(self._on_record, ItemAdded, ItemReplaced, ViewChanged,
                                                   SessionAdded, SessionRemoved)
        self.restored = restore_sessions(self.manager, self.store, self._install)
        if self.restored.problem:
            self._tell("registry-load", self.restored.problem, "warning")
        if self.restored.unloaded:
            self._tell("history-load", f"The chat history of {len(self.restored.unloaded)} session(s) could not be "
                       f"read from {self.store.history.path} ({self.store.history.last_error}); they show no "
                       "messages for now, and what is saved there is kept.", "warning")
        self._drafts_saved |= self.restored.draft_ids  # now rows: their draft rows go
        if self.store.history.claim() is WriteResult.RETRY:  # a newer writer wins: an older one stops
            self._tell_history_failing()
        self._tell_moved()
        if self.store.history.resets:  # moved aside while loading: the new file starts empty
            self._reseed()
        for sid in self.manager.ids():  # sessions added before we were attached
            if sid not in self._offsets:
                self._install_new(sid)
        self._arm_history()
        self.registry.arm()
        return self.restored

    # ---- notices ----------------------------------------------------------------------
    def on_notice(self, listener: NoticeListener) -> None:
        """Call ``listener`` with every notice so far and every later one (on the loop)."""
        self.board.listen(listener)

    @property
    def notices(self) -> list[Notice]:
        """Every notice told so far, oldest first."""
        return self.board.told

    def _tell(self, key: str, message: str, severity: Severity = "error") -> None:
        self.board.tell(key, message, severity)

    def _over(self, key: str, message: str) -> None:
        self.board.over(key, message)

    def _tell_history_failing(self) -> None:
        db = self.store.history
        self._tell("history", f"Chat history cannot be saved to {db.path}: {db.last_error}. New messages "
                   "are kept in memory and saved as soon as it can be written again.")

    def _tell_moved(self) -> None:
        moved, self.store.history.moved = self.store.history.moved, []
        for message in moved:
            self._tell(f"moved:{message}", f"{message}.", "warning")

    def _fence(self, what: str) -> None:
        """Another app took the folder over: stop writing, keep everything in memory."""
        self._fenced = True
        self.registry.stop()
        self._tell("fenced", f"Another polypilot took over the state folder {self.store.state_dir} ({what}); "
                   "this one no longer saves, so that neither undoes the other. Quit one of them.")

    def _install(self, session: Session, loaded: bool) -> None:
        self._offsets[session.id] = 0 if loaded else None
        self._draft_dirty.add(session.id)  # clears a stale draft, or saves the one restored

    def _install_new(self, session_id: str) -> None:
        """A session that is not on disk yet (new, or reopened after a close): all of its rows."""
        self._install(self.manager.session(session_id), True)
        for index, item in enumerate(self.manager.session(session_id).history):
            self._pending[(session_id, index)] = item

    # ---- change tracking (on the loop, cheap) ---------------------------------------
    def _on_record(self, change: Change) -> None:
        if isinstance(change, (ItemAdded, ItemReplaced)):
            if not self._closed and change.session_id in self._offsets:
                self._pending[(change.session_id, change.index)] = change.item
                self._arm_history()
        elif isinstance(change, SessionRemoved):
            self._forget(change.session_id)
        elif isinstance(change, SessionAdded):
            if change.session_id not in self._offsets:
                self._install_new(change.session_id)
            self.registry.arm()
        else:
            self._on_view(change.session_id)

    def _on_view(self, session_id: str) -> None:
        try:
            session = self.manager.session(session_id)
        except KeyError:
            return
        turn = session.turn
        seen = (turn.seq, len(turn.response)) if turn is not None else None
        if seen != self._draft_seen.get(session_id):
            self._draft_seen[session_id] = seen
            self._draft_dirty.add(session_id)
            self._arm_history()
        self.registry.arm()

    def _forget(self, session_id: str) -> None:
        if session_id not in self._offsets:
            return
        del self._offsets[session_id]
        self._draft_seen.pop(session_id, None)
        self._draft_dirty.discard(session_id)
        for key in [k for k in self._pending if k[0] == session_id]:
            del self._pending[key]
        self._deleted.add(session_id)
        self._arm_history()
        self.registry.arm()

    # ---- history --------------------------------------------------------------------
    def _arm_history(self, delay: float | None = None) -> None:
        if self._closed or self._fenced or self._history_timer is not None or self._history_flight is not None:
            return  # a flight in progress re-arms when it lands
        self._history_timer = self._loop.call_later(self.history_delay if delay is None else delay,
                                                    self._flush_history_soon)

    def _flush_history_soon(self) -> None:
        self._history_timer = None
        if not self._closed:
            self._start_history_flush()

    def _take_batch(self) -> _Batch | None:
        drafts: dict[str, tuple[str, float] | None] = {}
        wall = self.manager.clock.wall()
        for sid in self._draft_dirty:
            try:
                turn = self.manager.session(sid).turn
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
        batch = _Batch(rows, offsets, drafts, set(self._deleted))
        self._pending = {}
        self._deleted = set()
        return batch

    def _start_history_flush(self) -> asyncio.Future[Any] | None:
        batch = self._take_batch()
        if batch is None:
            return None
        flight = self._loop.run_in_executor(self._io, self._write_history, batch)
        self._history_flight = flight
        flight.add_done_callback(lambda f: self._history_landed(batch, f))
        return flight

    def _write_history(self, batch: _Batch) -> tuple[WriteResult, dict[str, int]]:
        """On the I/O thread: resolve unknown offsets, then write the batch in one transaction."""
        db = self.store.history
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

    def _history_landed(self, batch: _Batch, flight: asyncio.Future[Any]) -> None:
        self._history_flight = None
        try:
            result, resolved = flight.result()
        except Exception:  # noqa: BLE001
            log.exception("history write failed")
            result, resolved = WriteResult.DROPPED, {}
        self._tell_moved()
        db = self.store.history
        if result is WriteResult.FENCED:
            self._keep(batch)
            self._fence(db.last_error)
            return
        if result is WriteResult.RETRY:
            self._keep(batch)
            self._tell_history_failing()
            self._history_backoff = min(MAX_RETRY_DELAY, self._history_backoff * 2)
            self._arm_history(self._history_backoff)
            return
        if result is WriteResult.OK:
            self._over("history", f"Chat history is saved again to {db.path}.")
            for sid, offset in resolved.items():
                if sid in self._offsets:
                    self._offsets[sid] = offset
            for sid, draft in batch.drafts.items():
                (self._drafts_saved.add if draft is not None else self._drafts_saved.discard)(sid)
            self._history_backoff = self.history_delay
        elif result is WriteResult.RESET:
            self._reseed()
        if self._pending or self._draft_dirty or self._deleted:
            self._arm_history()

    def _keep(self, batch: _Batch) -> None:
        """A batch that was not written goes back to the pending set (newer changes win)."""
        for sid, idx, item in batch.rows:
            if sid in self._offsets:
                self._pending.setdefault((sid, idx), item)
        self._draft_dirty.update(sid for sid in batch.drafts if sid in self._offsets)
        self._deleted.update(batch.deletions)

    def _reseed(self) -> None:
        """The database was replaced by an empty one: write every live session again."""
        self._drafts_saved.clear()
        for sid in list(self._offsets):
            try:
                session = self.manager.session(sid)
            except KeyError:
                continue
            self._offsets[sid] = 0
            for index, item in enumerate(session.history):
                self._pending[(sid, index)] = item
            self._draft_dirty.add(sid)

    # ---- shutdown -------------------------------------------------------------------
    async def flush(self) -> None:
        """Write everything now (registry and history) and wait for it."""
        for _ in range(3):  # a flight in progress may have left more behind
            if self._history_timer is not None:
                self._history_timer.cancel()
                self._history_timer = None
            if self._history_flight is not None:
                await asyncio.wait([self._history_flight])
                continue
            if self._fenced:
                break
            flight = self._start_history_flush()
            if flight is None:
                break
            await asyncio.wait([flight])
        await self.registry.flush()

    async def close(self) -> None:
        """Flush, then release the database, recordings and the lock (the app is quitting).

        Whatever still could not be written is spilled and the user told in
        :data:`QUIT_NOTES` (the dashboard has left the terminal by the time it is printed).
        """
        if self._closed:
            return
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self.recorder is not None:
            self.recorder.close()
        try:  # a hung disk must not hang the quit
            await asyncio.wait_for(self.flush(), CLOSE_TIMEOUT)
            self._closed = True
            self.registry.stop()
            if self._history_timer is not None:  # a retry armed by the last failed flush
                self._history_timer.cancel()
                self._history_timer = None
            await asyncio.wait_for(self._loop.run_in_executor(self._io, self.store.close), CLOSE_TIMEOUT)
        except asyncio.TimeoutError:
            self._closed = True
            self.registry.stop()
            self._quit_note(f"saving to {self.store.state_dir} did not finish within {CLOSE_TIMEOUT:.0f} s; "
                            "the last changes may be missing there")
            self._io.shutdown(wait=False)
            self._release()
            return
        self._spill()
        self._io.shutdown(wait=True)
        self._release()

    def _release(self) -> None:
        lock, self.lock = self.lock, None
        if lock is not None:
            lock.release()

    def _spill(self) -> None:
        """Keep what could not be saved where the next start finds it, and say so."""
        if self._fenced:
            if self._pending:
                self._quit_note(f"{len(self._pending)} chat rows were not saved: another polypilot took over "
                                f"{self.store.state_dir}")
            return
        registry_failed = self.registry.failing
        if not (self._pending or self._deleted or registry_failed or self._draft_dirty):
            return
        batch = self._take_batch()
        spill = Spill(str(self.store.state_dir), self.manager.clock.wall())
        if registry_failed:
            spill.sessions = [r.redacted().to_json() for r in session_records(self.manager)]
        if batch is not None:
            for sid, idx, item in batch.rows:
                offset = batch.offsets.get(sid)
                if offset is None:
                    spill.appended.setdefault(sid, []).append(item)
                else:
                    spill.rows.append((sid, offset + idx, item))
            spill.drafts = dict(batch.drafts)
            spill.deletions = sorted(batch.deletions)
        if spill.empty():
            return
        why = self.store.history.last_error or "the store could not be written"
        what = f"{spill.row_count()} chat rows" + (" and the session list" if registry_failed else "")
        try:
            path = write_spill(spill)
        except OSError as exc:
            self._quit_note(f"{what} could not be saved to {self.store.state_dir} ({why}) nor kept anywhere "
                            f"else ({exc}); they are lost")
            return
        self._quit_note(f"{what} could not be saved to {self.store.state_dir} ({why}); they were kept in "
                        f"{path} and are written back at the next start")

    def _quit_note(self, text: str) -> None:
        log.error("%s", text)
        QUIT_NOTES.append(f"polypilot: {text}.")


def attach_persistence(manager: SessionManager, settings: Settings) -> Persistence:
    """Restore saved sessions into ``manager`` and keep them saved (call on the running loop)."""
    persistence = Persistence(manager, settings)
    persistence.start()
    return persistence
