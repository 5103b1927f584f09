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
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from polypilot_tui.config import Settings
from polypilot_tui.core.session import ChatItem, ItemKind, Session
from polypilot_tui.core.store import SessionRecord, Store, WriteResult
from polypilot_tui.core.view import derive_status
from polypilot_tui.manager import SessionManager
from polypilot_tui.recorder import Recorder, Redactor

log = logging.getLogger(__name__)

MAX_RETRY_DELAY = 5.0
CLOSE_TIMEOUT = 10.0


@dataclass
class RestoreResult:
    """What :func:`restore_sessions` brought back."""

    ids: list[str] = field(default_factory=list)
    mid_turn: list[str] = field(default_factory=list)
    unloaded: set[str] = field(default_factory=set)
    """Sessions whose history could not be read (locked database): shown empty, kept on disk."""
    draft_ids: set[str] = field(default_factory=set)
    """Sessions whose unfinished streamed reply came back as an interrupted assistant row."""
    problem: str = ""


BeforeAdopt = Callable[[Session, bool], None]
"""(session, history loaded) — called before a restored session is adopted."""


def restore_sessions(manager: SessionManager, store: Store, before_adopt: BeforeAdopt | None = None,
                     on_restore: Callable[[str, bool, str], None] | None = None) -> RestoreResult:
    """Build every saved session (history loaded, agent session id kept) and adopt it.

    Lazy: only a session whose turn was in flight reconnects at once, mid-turn, with the
    30 s resume-quiescence tier seeded from now; the engine reports a lost turn as
    interrupted with a one-key resend.
    """
    snapshot = store.registry.load()
    known = set(manager.ids())
    records = [r for r in snapshot.sessions if r.id not in known]
    ids = [r.id for r in records]
    histories = store.history.load_many(ids)
    drafts = store.history.load_drafts(ids) or {}
    problem = ""
    if snapshot.problem:
        problem = (f"The saved session list could not be used ({snapshot.problem}); "
                   "it was kept aside and the list starts empty.")
    result = RestoreResult(problem=problem)
    clock = manager.clock
    now, wall = clock.now(), clock.wall()
    for record in records:
        history = histories.get(record.id)
        session = Session(record.id, record.name, record.agent, created_wall=record.created_at,
                          cwd=record.cwd, model=record.model, agent_session_id=record.agent_session_id,
                          title=record.title, history=list(history or ()))
        session.last_prompt = record.last_prompt
        if record.last_activity_at is not None:  # "last activity 3 h ago" survives the restart
            session.last_activity_at = now - max(0.0, wall - record.last_activity_at)
        mid_turn = record.turn_in_flight
        if record.agent not in manager.catalog.agents:
            session.lost = f"agent {record.agent!r} is not configured any more"
            mid_turn = False
        if not mid_turn:
            session.interrupted_prompt = record.interrupted_prompt or (
                record.last_prompt if record.turn_in_flight else "")
        if before_adopt is not None:
            before_adopt(session, history is not None)
        if history is None:
            result.unloaded.add(record.id)
        elif record.id in drafts:
            text, at = drafts[record.id]
            session.add_item(ItemKind.ASSISTANT, text, at, interrupted=True)  # written through by the hook
            result.draft_ids.add(record.id)
        if on_restore is not None:
            on_restore(record.id, mid_turn, record.last_prompt)
        manager.adopt(session, mid_turn_prompt=record.last_prompt if mid_turn else None)
        result.ids.append(record.id)
        if mid_turn:
            result.mid_turn.append(record.id)
    if records:
        log.info("restored %d sessions (%d mid-turn)", len(result.ids), len(result.mid_turn))
    return result


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
        self.store = Store(Path(settings.state_dir))
        self.recorder: Recorder | None = None
        if settings.record:
            key_vars = [a.provider.api_key_env for a in manager.catalog.agents.values()
                        if a.provider is not None and a.provider.api_key_env]
            self.recorder = Recorder(self.store.state_dir / "recordings", manager.clock, settings.record_max_bytes,
                                     key_vars)
        self._redactor = Redactor()
        self._loop = asyncio.get_running_loop()
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
        self._registry_timer: asyncio.TimerHandle | None = None
        self._registry_flight: asyncio.Future[Any] | None = None
        self._registry_backoff = registry_delay
        self._registry_failing = False
        self._last_registry: tuple[SessionRecord, ...] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._closed = False
        self.restored = RestoreResult()

    # ---- start ----------------------------------------------------------------------
    def start(self) -> RestoreResult:
        """Restore saved sessions, then watch the manager (call once, on the loop)."""
        self.restored = restore_sessions(self.manager, self.store, self._install,
                                         self.recorder.note_restore if self.recorder else None)
        self._drafts_saved |= self.restored.draft_ids  # now rows: their draft rows go
        if self.store.history.resets:  # moved aside while loading: the new file starts empty
            self._reseed()
        for sid in self.manager.ids():  # sessions added before we were attached
            if sid not in self._offsets:
                self._install(self.manager.session(sid), True)
                for index, item in enumerate(self.manager.session(sid).history):
                    self._pending[(sid, index)] = item
        self._unsubscribe = self.manager.subscribe(self._on_change)
        if self.recorder is not None:
            self.recorder.attach(self.manager)
        self._arm_history()
        self._arm_registry()
        return self.restored

    def _install(self, session: Session, loaded: bool) -> None:
        self._offsets[session.id] = 0 if loaded else None
        session.item_hook = self._item_hook
        self._draft_dirty.add(session.id)  # clears a stale draft, or saves the one restored

    # ---- change tracking (on the loop, cheap) ---------------------------------------
    def _item_hook(self, session: Session, index: int, item: ChatItem) -> None:
        if self._closed or session.id not in self._offsets:
            return
        self._pending[(session.id, index)] = item
        self._arm_history()

    def _on_change(self, session_id: str) -> None:
        try:
            session = self.manager.session(session_id)
        except KeyError:
            self._forget(session_id)
            return
        if session_id not in self._offsets:  # new through manager.add_session: no rows yet
            self._install(session, True)
            for index, item in enumerate(session.history):
                self._pending[(session_id, index)] = item
        turn = session.turn
        seen = (turn.seq, len(turn.response)) if turn is not None else None
        if seen != self._draft_seen.get(session_id):
            self._draft_seen[session_id] = seen
            self._draft_dirty.add(session_id)
            self._arm_history()
        self._arm_registry()

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
        self._arm_registry()

    # ---- history --------------------------------------------------------------------
    def _arm_history(self, delay: float | None = None) -> None:
        if self._closed or self._history_timer is not None or self._history_flight is not None:
            return  # a flight in progress re-arms when it lands
        self._history_timer = self._loop.call_later(self.history_delay if delay is None else delay,
                                                    self._flush_history_soon)

    def _flush_history_soon(self) -> None:
        self._history_timer = None
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
        if result is WriteResult.OK:
            for sid, offset in resolved.items():
                if sid in self._offsets:
                    self._offsets[sid] = offset
            for sid, draft in batch.drafts.items():
                (self._drafts_saved.add if draft is not None else self._drafts_saved.discard)(sid)
            self._history_backoff = self.history_delay
        elif result is WriteResult.RETRY:
            for sid, idx, item in batch.rows:  # keep what changed since; add back the rest
                if sid in self._offsets:
                    self._pending.setdefault((sid, idx), item)
            self._draft_dirty.update(sid for sid in batch.drafts if sid in self._offsets)
            self._deleted.update(batch.deletions)
            self._history_backoff = min(MAX_RETRY_DELAY, self._history_backoff * 2)
            self._arm_history(self._history_backoff)
            return
        elif result is WriteResult.RESET:
            self._reseed()
        if self._pending or self._draft_dirty or self._deleted:
            self._arm_history()

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

    # ---- registry -------------------------------------------------------------------
    def _arm_registry(self, delay: float | None = None) -> None:
        if self._closed or self._registry_timer is not None or self._registry_flight is not None:
            return
        self._registry_timer = self._loop.call_later(self.registry_delay if delay is None else delay,
                                                     self._flush_registry_soon)

    def _flush_registry_soon(self) -> None:
        self._registry_timer = None
        self._start_registry_flush(self._snapshot(), os.getpid())

    def _snapshot(self) -> tuple[SessionRecord, ...]:
        clock = self.manager.clock
        now, wall = clock.now(), clock.wall()
        records = []
        for sid in self.manager.ids():
            s = self.manager.session(sid)
            status, reason = derive_status(s)
            turn = s.turn
            activity = None if s.last_activity_at is None else wall - max(0.0, now - s.last_activity_at)
            records.append(SessionRecord(
                id=s.id, name=s.name, agent=s.agent, cwd=s.cwd, model=s.model,
                agent_session_id=s.agent_session_id, title=s.title, created_at=s.created_wall,
                status=status.value, reason=self._redactor.text(reason), last_activity_at=activity,
                turn_in_flight=turn is not None, last_prompt=(turn.prompt or s.last_prompt) if turn else "",
                interrupted_prompt=s.interrupted_prompt))
        return tuple(records)

    def _start_registry_flush(self, snapshot: tuple[SessionRecord, ...],
                              pid: int | None) -> asyncio.Future[Any] | None:
        if snapshot == self._last_registry and pid is not None:
            return None
        wall = self.manager.clock.wall()
        flight = self._loop.run_in_executor(self._io, self.store.registry.save, snapshot, wall, pid)
        self._registry_flight = flight

        def landed(f: asyncio.Future[Any]) -> None:
            self._registry_flight = None
            if f.cancelled() or f.exception() is not None:
                if not self._registry_failing:  # once per outage, not every retry
                    log.error("saving the session registry failed (retrying): %s",
                              None if f.cancelled() else f.exception())
                self._registry_failing = True
                self._last_registry = None
                self._registry_backoff = min(MAX_RETRY_DELAY, self._registry_backoff * 2)
                self._arm_registry(self._registry_backoff)
                return
            if self._registry_failing:
                log.info("the session registry is saved again")
            self._registry_failing = False
            self._last_registry = snapshot
            self._registry_backoff = self.registry_delay
            if self._snapshot_changed():
                self._arm_registry()

        flight.add_done_callback(landed)
        return flight

    def _snapshot_changed(self) -> bool:
        return not self._closed and self._snapshot() != self._last_registry

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
            flight = self._start_history_flush()
            if flight is None:
                break
            await asyncio.wait([flight])
        if self._registry_timer is not None:
            self._registry_timer.cancel()
            self._registry_timer = None
        if self._registry_flight is not None:
            await asyncio.wait([self._registry_flight])
        flight = self._start_registry_flush(self._snapshot(), None if self._closed else os.getpid())
        if flight is not None:
            await asyncio.wait([flight])

    async def close(self) -> None:
        """Flush, then release the database and recordings (the app is quitting)."""
        if self._closed:
            return
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._closed = True  # the final registry says "no app running" (pid None)
        if self.recorder is not None:
            self.recorder.close()
        try:  # a hung disk must not hang the quit
            await asyncio.wait_for(self.flush(), CLOSE_TIMEOUT)
            await asyncio.wait_for(self._loop.run_in_executor(self._io, self.store.close), CLOSE_TIMEOUT)
        except asyncio.TimeoutError:
            log.error("saving sessions did not finish within %.0f s; quitting without it", CLOSE_TIMEOUT)
            self._io.shutdown(wait=False)
            return
        if self._pending or self._draft_dirty:
            log.warning("quitting with %d history rows unsaved (database unavailable)", len(self._pending))
        self._io.shutdown(wait=True)


def attach_persistence(manager: SessionManager, settings: Settings) -> Persistence:
    """Restore saved sessions into ``manager`` and keep them saved (call on the running loop)."""
    persistence = Persistence(manager, settings)
    persistence.start()
    return persistence
