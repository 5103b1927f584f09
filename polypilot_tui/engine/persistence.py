"""Sessions survive a restart: glue between the SessionManager and the store.

``attach_persistence(manager, settings)`` restores the saved sessions (lazily: no agent starts
unless a turn was in flight), then keeps the registry (engine/registry_sync.py) and the chat
history with its streaming drafts (engine/history_sync.py) written through while the app
runs, and records every session's event stream. All file and database I/O runs on one
worker thread; the loop only takes snapshots and arms short timers on the engine's clock.

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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from polypilot_tui.config import Settings
from polypilot_tui.domain.records import ItemAdded, ItemReplaced, Record, SessionAdded, SessionRemoved, ViewChanged
from polypilot_tui.engine.history_sync import HistoryWriter
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.read_ahead import ReadAhead
from polypilot_tui.engine.recorder import Recorder
from polypilot_tui.engine.registry_sync import RegistryWriter, session_records
from polypilot_tui.engine.restore import RestoreResult, restore_sessions
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.storage.history import WriteResult
from polypilot_tui.storage.lock import StateLock
from polypilot_tui.storage.notices import Notice, NoticeBoard, NoticeListener, Severity
from polypilot_tui.storage.spill import Spill, write_spill
from polypilot_tui.storage.store import Store

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 10.0

QUIT_NOTES: list[str] = []
"""What the user must read after the dashboard has left the terminal (unsaved data at quit);
the CLI prints and clears it."""


class Persistence:
    """Keeps the registry, history and recordings in step with a SessionManager."""

    def __init__(
        self, manager: SessionManager, settings: Settings, *, registry_delay: float = 0.5, history_delay: float = 0.2
    ) -> None:
        self.manager = manager
        self.settings = settings
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
        self._unsubscribe: Callable[[], None] | None = None
        self._closed = False
        self._fenced = False
        """Another app took the state folder over: nothing more is written."""
        self.board = NoticeBoard()
        self.registry = RegistryWriter(manager, self.store.registry, self._io, self.board, registry_delay, self._fence)
        self.history = HistoryWriter(manager, self.store.history, self._io, self.board, history_delay, self._fence)
        self.restored = RestoreResult()
        self.read_ahead = ReadAhead(manager)

    # ---- start ----------------------------------------------------------------------
    def start(self) -> RestoreResult:
        """Restore saved sessions, then watch the manager (call once, on the loop)."""
        if self.store.problem:
            self._tell("folder", f"Nothing can be saved: {self.store.problem}.")
        for message in self.store.recover_spills():
            self._tell(f"spill:{message}", message, "information")
        if self.recorder is not None:  # before the restore: restored sessions start with a restore line
            self.recorder.attach(self.manager)
        self._unsubscribe = self.manager.subscribe(
            self._on_change, ItemAdded, ItemReplaced, ViewChanged, SessionAdded, SessionRemoved
        )
        self.restored = restore_sessions(self.manager, self.store, self.history.install)
        if self.restored.problem:
            self._tell("registry-load", self.restored.problem, "warning")
        if self.restored.unloaded:
            self._tell(
                "history-load",
                f"The chat history of {len(self.restored.unloaded)} session(s) could not be "
                f"read from {self.store.history.path} ({self.store.history.last_error}); they show no "
                "messages for now, and what is saved there is kept.",
                "warning",
            )
        self.history.drafts_restored(self.restored.draft_ids)
        self.read_ahead.start(self.restored.ids)
        if self.store.history.claim() is WriteResult.RETRY:  # a newer writer wins: an older one stops
            self.history.tell_failing()
        self.history.tell_moved()
        if self.store.history.resets:  # moved aside while loading: the new file starts empty
            self.history.reseed()
        for sid in self.manager.ids():  # sessions added before we were attached
            self.history.install_new(sid)
        self.history.arm()
        self.registry.arm()
        return self.restored

    def _on_change(self, change: Record) -> None:
        self.history.track(change)
        if isinstance(change, SessionAdded):  # an undone close may bring rows not read yet
            self.read_ahead.add(change.session_id)
        if not isinstance(change, (ItemAdded, ItemReplaced)):
            self.registry.arm()

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

    def _fence(self, what: str) -> None:
        """Another app took the folder over: stop writing, keep everything in memory."""
        if self._fenced:
            return
        self._fenced = True
        self.registry.stop()
        self.history.stop()
        self._tell(
            "fenced",
            f"Another polypilot took over the state folder {self.store.state_dir} ({what}); "
            "this one no longer saves, so that neither undoes the other. Quit one of them.",
        )

    # ---- shutdown -------------------------------------------------------------------
    async def flush(self) -> None:
        """Write everything now (registry and history) and wait for it."""
        await self.history.flush()
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
        self.history.end_undo()
        try:  # a hung disk must not hang the quit
            await asyncio.wait_for(self.flush(), CLOSE_TIMEOUT)
            self._stop_writers()
            self.store.saved.close()  # the loop's connection, closed on the loop
            await asyncio.wait_for(self._loop.run_in_executor(self._io, self.store.history.close), CLOSE_TIMEOUT)
        except TimeoutError:
            self._stop_writers()
            self._quit_note(
                f"saving to {self.store.state_dir} did not finish within {CLOSE_TIMEOUT:.0f} s; "
                "the last changes may be missing there"
            )
            self._io.shutdown(wait=False)
            self._release()
            return
        self._spill()
        self._io.shutdown(wait=True)
        self._release()

    def _stop_writers(self) -> None:
        self._closed = True
        self.read_ahead.stop()
        self.registry.stop()
        self.history.stop()  # also cancels a retry armed by the last failed write

    def _release(self) -> None:
        lock, self.lock = self.lock, None
        if lock is not None:
            lock.release()

    def _spill(self) -> None:
        """Keep what could not be saved where the next start finds it, and say so."""
        if self._fenced:
            if self.history.unsaved_rows:
                self._quit_note(
                    f"{self.history.unsaved_rows} chat rows were not saved: another polypilot took "
                    f"over {self.store.state_dir}"
                )
            return
        registry_failed = self.registry.failing
        if not (self.history.unsaved or registry_failed):
            return
        batch = self.history.take_batch()
        spill = Spill(str(self.store.state_dir), self.manager.clock.wall())
        if registry_failed:
            spill.sessions = [r.to_json() for r in session_records(self.manager)]  # redacted by write_spill
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
            paths = write_spill(spill)
        except OSError as exc:
            self._quit_note(
                f"{what} could not be saved to {self.store.state_dir} ({why}) nor kept anywhere "
                f"else ({exc}); they are lost"
            )
            return
        self._quit_note(
            f"{what} could not be saved to {self.store.state_dir} ({why}); they were kept in "
            f"{' and '.join(str(p) for p in paths)} and are written back at the next start"
        )

    def _quit_note(self, text: str) -> None:
        log.error("%s", text)
        QUIT_NOTES.append(f"polypilot: {text}.")


def attach_persistence(manager: SessionManager, settings: Settings) -> Persistence:
    """Restore saved sessions into ``manager`` and keep them saved (call on the running loop)."""
    persistence = Persistence(manager, settings)
    persistence.start()
    return persistence
