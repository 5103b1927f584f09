"""Recordings: every session's raw agent event stream as a trace ``polypilot replay`` reads.

One file per session per app run, ``state_dir/recordings/<session-id>-<start>.jsonl`` (0600):
``{"at": seconds since the recording started, "event": {...}}`` lines, plus ``send``,
``stop`` and ``reconnect`` lines for what the user did and a ``restore`` line first when the
session came back from disk. Engine-initiated actions (watchdog aborts, automatic recovery)
are written as ``#`` comments: a replay re-derives them, so replaying them would double them.
Every line is redacted whole before it is written (:meth:`Recorder._entry`; a streamed
delta with the text its stream said before it, so a secret split across deltas is found); a
recording stops at its size cap with a marker line.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.records import (
    ActionTaken,
    EngineAction,
    EventReceived,
    Record,
    SessionAdded,
    SessionRemoved,
    ViewChanged,
)
from polypilot_tui.domain.trace import dump_entry
from polypilot_tui.domain.turn import EndCause
from polypilot_tui.infra.private import open_private, private_dir
from polypilot_tui.infra.redact import REDACTOR, StreamTails

if TYPE_CHECKING:
    from polypilot_tui.domain.clock import Clock
    from polypilot_tui.engine.manager import SessionManager

log = logging.getLogger(__name__)

_STREAM_IDS = ("messageId", "toolCallId", "reasoningId")
"""What tells one stream of an event type from another (one reply, one tool call)."""


# ---- recordings --------------------------------------------------------------------
@dataclass
class _Recording:
    session_id: str
    start: float
    """Clock seconds at which ``at`` is 0."""
    restore: dict[str, Any] | None = None
    """The ``restore`` line still to be written first (None when written or not restored)."""
    hints_known: bool = False
    path: Path | None = None
    fh: IO[bytes] | None = None
    size: int = 0
    stopped: bool = False
    comments: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    """Lines that arrived while a restored session was still connecting: they are written
    after the ``restore`` line, once the resume hints they depend on are known."""
    streams: StreamTails = field(default_factory=StreamTails)
    """What each of its streams (reply, reasoning) said last: the context of the next delta."""


class Recorder:
    """Writes one trace per session; attach it to a manager with :meth:`attach`."""

    def __init__(self, directory: Path, clock: Clock, max_bytes: int) -> None:
        self.directory = Path(directory)
        self.clock = clock
        self.max_bytes = max(0, int(max_bytes))
        REDACTOR.learn_environment()
        self._recordings: dict[str, _Recording] = {}
        self._manager: SessionManager | None = None
        self._failed = False
        self._closed = False

    def attach(self, manager: SessionManager) -> None:
        """Record what the manager's record stream says: agent events, actions, restores."""
        self._manager = manager
        manager.subscribe(self.on_record, EventReceived, ActionTaken, SessionAdded, SessionRemoved, ViewChanged)

    def on_record(self, change: Record) -> None:
        """One record of the record stream."""
        if isinstance(change, EventReceived):
            self.on_event(change.session_id, change.event)
        elif isinstance(change, ActionTaken):
            self._guard(self._action, change)
        elif isinstance(change, SessionAdded):
            if change.restored:
                self.note_restore(change.session_id, change.mid_turn, change.prompt)
        else:
            self._guard(self._change, change.session_id)

    def note_restore(self, session_id: str, mid_turn: bool, prompt: str) -> None:
        """The session comes back from disk: its recording starts with a ``restore`` line."""
        restore: dict[str, Any] = {"mid_turn": mid_turn}
        if mid_turn and prompt:
            restore["prompt"] = prompt
        self._recordings[session_id] = _Recording(session_id, self.clock.now(), restore)

    def path(self, session_id: str) -> Path | None:
        """Where this run's recording of a session is (None before its first line)."""
        rec = self._recordings.get(session_id)
        return rec.path if rec else None

    # ---- taps ---------------------------------------------------------------------
    def on_event(self, session_id: str, event: AgentEvent) -> None:
        self._guard(self._line, session_id, "event", {"type": event.type, "data": event.data})

    def _guard(self, fn: Any, *args: Any) -> None:
        if self._closed:  # the app is quitting: late events must not open new files
            return
        try:
            fn(*args)
        except OSError as exc:  # a full disk or a gone folder: a recording must never break a session
            if not self._failed:
                self._failed = True
                log.error("recording failed (%s); later failures are not logged", exc)

    def _action(self, change: ActionTaken) -> None:
        session_id, action = change.session_id, change.action
        if change.by_user and action in (EngineAction.SEND, EngineAction.RESEND):
            self._line(session_id, "send", change.prompt)
        elif change.by_user and action is EngineAction.ABORT:
            self._line(session_id, "stop", {})
        elif change.by_user and action is EngineAction.RECONNECT:
            self._line(session_id, "reconnect", {})
        else:  # the engine did it; a replay re-derives it
            said = change.reason or change.prompt
            note = f"{action.value}: {said}" if said else action.value
            self._comment(session_id, " ".join(note.split()))

    def _change(self, session_id: str) -> None:
        rec = self._recordings.get(session_id)
        if rec is None:
            return
        session = self._session(session_id)
        if session is None:  # closed: its recording is complete
            self._close(rec)
            del self._recordings[session_id]
            return
        if rec.hints_known or session.connecting or not (session.connected or session.lost):
            return
        # First change after the resume connect: what the agent said about the turn in flight.
        rec.hints_known = True
        if rec.restore is not None:
            rec.restore.update(self._resume_hints(session_id, session))
            if rec.restore.get("mid_turn") or rec.pending:
                self._ensure_open(rec)  # the resumed turn's clock starts now, not at the first event
        pending, rec.pending = rec.pending, []
        for line in pending:
            self._write(rec, line)

    def _resume_hints(self, session_id: str, session: Any) -> dict[str, bool]:
        """The connect result's hints, as ``polypilot replay``'s ``restore`` line takes them."""
        try:
            result = self._manager.connect_result(session_id)  # type: ignore[union-attr]
        except (AttributeError, KeyError):
            result = None
        if result is not None:
            return {
                "interrupted_tool": bool(result.interrupted_tool),
                "still_processing": bool(result.still_processing),
                "lost_turn": bool(result.lost_turn),
            }
        last = session.last_outcome  # inferred from what the engine did with them
        return {
            "interrupted_tool": bool(session.interrupted_tool),
            "still_processing": bool(session.turn is not None and session.turn.resumed and session.turn.used_tools),
            "lost_turn": bool(session.turn is None and last is not None and last.cause is EndCause.LOST_IN_RESTART),
        }

    def _session(self, session_id: str) -> Any:
        manager = self._manager
        if manager is None:
            return None
        try:
            return manager.session(session_id)
        except KeyError:
            return None

    # ---- files --------------------------------------------------------------------
    def _recording(self, session_id: str) -> _Recording:
        rec = self._recordings.get(session_id)
        if rec is None:
            rec = self._recordings[session_id] = _Recording(session_id, self.clock.now())
        return rec

    def _ensure_open(self, rec: _Recording) -> bool:
        if rec.stopped:
            return False
        if rec.fh is None:
            private_dir(self.directory)
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self.clock.wall()))
            for n in range(100):
                path = self.directory / f"{rec.session_id}-{stamp}{'' if n == 0 else f'-{n}'}.jsonl"
                try:
                    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND)
                    break
                except FileExistsError:
                    continue
            else:
                raise OSError(f"no free recording name for {rec.session_id}")
            rec.fh = os.fdopen(fd, "ab", buffering=0)  # one write per line: a kill loses nothing
            rec.path = path
            if rec.restore is not None:
                restore, rec.restore = rec.restore, None
                self._write(rec, self._entry(rec, 0.0, "restore", restore))
        return not rec.stopped

    def _line(self, session_id: str, action: str, value: Any) -> None:
        rec = self._recording(session_id)
        self._emit(rec, self._entry(rec, max(0.0, self.clock.now() - rec.start), action, value))

    def _comment(self, session_id: str, text: str) -> None:
        rec = self._recording(session_id)
        self._emit(rec, f"# {max(0.0, self.clock.now() - rec.start):.3f} {REDACTOR.text(text)}")

    @staticmethod
    def _entry(rec: _Recording, at: float, action: str, value: Any) -> str:
        """One line, every text in it redacted: the one way a line is made. An event's pieces
        (deltas) are read after what their stream (this reply, this tool call's arguments …)
        said before them."""
        stream: tuple[Any, ...] = (action,)
        if action == "event" and isinstance(value, dict):
            data = value.get("data")
            ids = [data.get(k) for k in _STREAM_IDS] if isinstance(data, Mapping) else []
            stream = (value.get("type"), *ids)
        return dump_entry(at, action, rec.streams.scrub(stream, value))

    def _emit(self, rec: _Recording, line: str) -> None:
        session = self._session(rec.session_id) if rec.restore is not None and not rec.hints_known else None
        if session is not None and session.connecting:
            rec.pending.append(line)  # e.g. session.resume, emitted while the resume connects
        elif self._ensure_open(rec):
            self._write(rec, line)

    def _write(self, rec: _Recording, line: str) -> None:
        data = (line + "\n").encode("utf-8")
        if rec.fh is None or rec.stopped:
            return
        if rec.size + len(data) > self.max_bytes:
            rec.fh.write(f"# recording stopped at {rec.size} bytes\n".encode())
            rec.stopped = True
            self._close(rec)
            return
        rec.fh.write(data)
        rec.size += len(data)

    def _close(self, rec: _Recording) -> None:
        fh, rec.fh = rec.fh, None
        if fh is not None:
            try:
                fh.close()
            except OSError as exc:
                log.warning("closing a recording failed: %s", exc)

    def close(self) -> None:
        """Close every file (the app is quitting); later events are ignored."""
        self._closed = True
        for rec in self._recordings.values():
            self._close(rec)
