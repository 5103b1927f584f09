"""Registry and chat-history persistence: a JSON file and a SQLite cache, stdlib only.

The registry (``sessions.json``) says which sessions exist and whether a turn was in flight;
it is replaced atomically (temp file, fsync, rename) so a crash leaves the old file or the
new one, never half of either. The history database is a write-through *cache* (PolyPilot
#276): every failure is caught and logged once, a locked database is retried later, and a
corrupt one is moved aside and started afresh. Nothing here touches the event loop; the
caller decides on which thread these blocking calls run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sqlite3
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from polypilot_tui.core.session import ChatItem, ItemKind

log = logging.getLogger(__name__)

REGISTRY_FILE = "sessions.json"
HISTORY_FILE = "history.db"
REGISTRY_VERSION = 1
FILE_MODE = 0o600
DIR_MODE = 0o700
SCHEMA_VERSION = 1


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (0700): registry, history and recordings are the user's eyes only."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(path, DIR_MODE)
    except OSError as exc:  # not ours to chmod (shared dir): keep going, files stay 0600
        log.warning("cannot make %s private: %s", path, exc)
    return path


def atomic_write(path: Path, data: bytes, mode: int = FILE_MODE) -> None:
    """Replace ``path`` with ``data``: readers see the old file or the new one, never a mix."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    # The rename itself is durable only once the directory entry is on disk.
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def move_aside(path: Path, why: str) -> Path | None:
    """Rename a broken file to ``<name>.corrupt-<time>`` so it can be inspected later."""
    target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.error("cannot move the broken %s aside (%s): %s", path, why, exc)
        return None
    log.error("%s was unreadable (%s); moved it to %s and started a new one", path.name, why, target.name)
    return target


# ---- registry ----------------------------------------------------------------------
@dataclass(frozen=True)
class SessionRecord:
    """One session in ``sessions.json``. Times are epoch seconds."""

    id: str
    name: str
    agent: str
    cwd: str = ""
    model: str = ""
    agent_session_id: str = ""
    """The agent's own id, adopted after every connect (#382): what a resume needs."""
    title: str = ""
    created_at: float = 0.0
    status: str = "idle"
    reason: str = ""
    last_activity_at: float | None = None
    turn_in_flight: bool = False
    last_prompt: str = ""
    """Only while a turn is in flight (PolyPilot's ``LastPrompt``): resent or resumed on restore."""
    interrupted_prompt: str = ""
    """A turn lost to a restart and not yet resent: still offered after the next restart."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Any) -> SessionRecord | None:
        """Tolerant parse: unknown keys are ignored, a wrong type drops the field (None when unusable)."""
        if not isinstance(obj, Mapping):
            return None
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in obj:
                continue
            value = obj[f.name]
            if f.name == "last_activity_at":
                ok = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
            elif f.name == "created_at":
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            elif f.name == "turn_in_flight":
                ok = isinstance(value, bool)
            else:
                ok = isinstance(value, str)
            if ok:
                values[f.name] = value
        if not all(isinstance(values.get(k), str) and values[k] for k in ("id", "name", "agent")):
            return None
        return cls(**values)


@dataclass(frozen=True)
class RegistrySnapshot:
    """What ``sessions.json`` held."""

    sessions: tuple[SessionRecord, ...] = ()
    saved_at: float | None = None
    writer_pid: int | None = None
    """The app that wrote it, while it runs (None after a clean exit)."""
    writer_host: str = ""
    problem: str = ""
    """Why the file could not be used as it was ("" when it was fine or absent)."""

    def writer_alive(self) -> bool:
        """True when the writing app still runs on this machine."""
        if self.writer_pid is None or self.writer_host != socket.gethostname():
            return False
        try:
            os.kill(self.writer_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # somebody's process: alive
            return True
        except OSError:
            return False
        return True


class Registry:
    """``state_dir/sessions.json``: the list of sessions, replaced atomically."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / REGISTRY_FILE
        self.writes = 0

    def load(self, repair: bool = True) -> RegistrySnapshot:
        """Read the registry; a corrupt file is moved aside when ``repair`` (never raises)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return RegistrySnapshot()
        except OSError as exc:
            log.error("cannot read %s: %s", self.path, exc)
            return RegistrySnapshot(problem=f"cannot read: {exc}")
        try:
            obj = json.loads(raw.decode("utf-8"))
            if not isinstance(obj, dict) or not isinstance(obj.get("sessions"), list):
                raise ValueError("expected an object with a 'sessions' list")
        except (ValueError, UnicodeDecodeError) as exc:
            if repair:
                move_aside(self.path, str(exc))
            return RegistrySnapshot(problem=f"corrupt: {exc}")
        records = []
        seen: set[str] = set()
        for entry in obj["sessions"]:
            record = SessionRecord.from_json(entry)
            if record is None or record.id in seen:
                log.warning("skipped an unusable entry in %s", self.path.name)
                continue
            seen.add(record.id)
            records.append(record)
        pid = obj.get("pid")
        saved = obj.get("saved_at")
        return RegistrySnapshot(tuple(records), saved if isinstance(saved, (int, float)) else None,
                                pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
                                str(obj.get("host") or ""))

    def save(self, records: Sequence[SessionRecord], saved_at: float, writer_pid: int | None) -> None:
        """Replace the registry (blocking: temp file, fsync, rename). Raises OSError."""
        doc = {"version": REGISTRY_VERSION, "saved_at": saved_at, "pid": writer_pid,
               "host": socket.gethostname() if writer_pid is not None else "",
               "sessions": [r.to_json() for r in records]}
        atomic_write(self.path, json.dumps(doc, ensure_ascii=False, indent=1).encode("utf-8"))
        self.writes += 1


# ---- history -----------------------------------------------------------------------
class WriteResult(StrEnum):
    """How a history write went."""

    OK = "ok"
    RETRY = "retry"
    """Locked, busy or a transient I/O error: nothing was written; try the same batch later."""
    RESET = "reset"
    """The database was corrupt and has been replaced by an empty one: write everything again."""
    DROPPED = "dropped"
    """An unexpected error: the batch is lost (logged)."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    session_id TEXT NOT NULL, idx INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL,
    at REAL NOT NULL, tool_call_id TEXT, tool_name TEXT NOT NULL DEFAULT '',
    tool_status TEXT NOT NULL DEFAULT '', tool_detail TEXT NOT NULL DEFAULT '',
    interrupted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (session_id, idx));
CREATE TABLE IF NOT EXISTS drafts (
    session_id TEXT PRIMARY KEY, text TEXT NOT NULL, at REAL NOT NULL);
"""
_COLUMNS = "kind, text, at, tool_call_id, tool_name, tool_status, tool_detail, interrupted"
_KINDS = {k.value: k for k in ItemKind}

Row = tuple[str, int, ChatItem]
"""(session id, index in the database, item)."""


def _item(row: Sequence[Any]) -> ChatItem:
    kind, text, at, call_id, tool_name, tool_status, tool_detail, interrupted = row
    return ChatItem(_KINDS.get(kind, ItemKind.SYSTEM), text or "", float(at or 0.0), call_id or None,
                    tool_name or "", tool_status or "", tool_detail or "", bool(interrupted))


def _is_locked(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _is_corrupt(exc: sqlite3.Error) -> bool:
    # Only SQLITE_CORRUPT / SQLITE_NOTADB: a binding bug must never move the user's file aside.
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    return name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in text or "not a database" in text


class HistoryDB:
    """``state_dir/history.db``: chat rows keyed by (session id, index), plus streaming drafts.

    Not thread-safe: use it from one thread at a time (the app uses one I/O thread).
    """

    def __init__(self, path: Path, busy_timeout: float = 0.0) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._logged: set[str] = set()
        self.resets = 0

    # ---- connection -----------------------------------------------------------------
    def _log_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.warning(message, *args)

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        # Create the file ourselves so it is 0600 from its first byte; SQLite gives the
        # -wal and -shm files the same mode as the database.
        os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, FILE_MODE))
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL: durable at checkpoints, never torn
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except BaseException:
            conn.close()
            raise
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.chmod(f"{self.path}{suffix}", FILE_MODE)
        self._conn = conn
        self._logged.discard("locked")
        return conn

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def _reset(self, exc: BaseException) -> None:
        """The file is not a database any more: move it aside and start a new one."""
        self.close()
        self.resets += 1
        move_aside(self.path, str(exc))
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(f"{self.path}{suffix}")

    def _failed(self, exc: BaseException, what: str) -> WriteResult:
        if isinstance(exc, sqlite3.Error) and _is_locked(exc):
            self._log_once("locked", "history database is locked (%s); will retry", what)
            return WriteResult.RETRY
        if isinstance(exc, sqlite3.Error) and _is_corrupt(exc):
            self._reset(exc)
            return WriteResult.RESET
        if isinstance(exc, (sqlite3.OperationalError, OSError)):
            self._log_once(f"io:{type(exc).__name__}", "history database unavailable (%s): %s", what, exc)
            self.close()
            return WriteResult.RETRY
        self._log_once(f"bug:{type(exc).__name__}", "history database failed (%s): %r", what, exc)
        return WriteResult.DROPPED

    # ---- reads ----------------------------------------------------------------------
    def load_many(self, session_ids: Iterable[str]) -> dict[str, list[ChatItem]]:
        """History of each session; ids that could not be read are missing from the result."""
        result: dict[str, list[ChatItem]] = {}
        for sid in session_ids:
            items = self.load(sid)
            if items is not None:
                result[sid] = items
        return result

    def load(self, session_id: str) -> list[ChatItem] | None:
        """One session's rows in order (None when the database cannot be read now)."""
        try:
            conn = self._connect()
            rows = conn.execute(f"SELECT idx, {_COLUMNS} FROM items WHERE session_id=? ORDER BY idx",
                                (session_id,)).fetchall()
        except Exception as exc:  # noqa: BLE001 - a cache never blocks a session (#276)
            # After a reset the new database is known to be empty; otherwise: unknown.
            return [] if self._failed(exc, f"loading {session_id}") is WriteResult.RESET else None
        items = [_item(row[1:]) for row in rows]
        if any(row[0] != i for i, row in enumerate(rows)):
            # Gaps would make new rows overwrite old ones: renumber densely once.
            self._log_once(f"gap:{session_id}", "history of %s had gaps; renumbered", session_id)
            if self.replace_session(session_id, items) is not WriteResult.OK:
                return None
        return items

    def load_drafts(self, session_ids: Iterable[str]) -> dict[str, tuple[str, float]] | None:
        """Unfinished streamed replies by session id (None when unreadable now)."""
        wanted = set(session_ids)
        try:
            rows = self._connect().execute("SELECT session_id, text, at FROM drafts").fetchall()
        except Exception as exc:  # noqa: BLE001
            return {} if self._failed(exc, "loading drafts") is WriteResult.RESET else None
        return {sid: (text, float(at)) for sid, text, at in rows if sid in wanted and text}

    def next_index(self, session_id: str) -> int | None:
        """One past the highest stored index (0 when none; None when unreadable now)."""
        try:
            row = self._connect().execute("SELECT MAX(idx) FROM items WHERE session_id=?",
                                          (session_id,)).fetchone()
        except Exception as exc:  # noqa: BLE001
            return 0 if self._failed(exc, f"reading {session_id}") is WriteResult.RESET else None
        return 0 if row is None or row[0] is None else int(row[0]) + 1

    # ---- writes ---------------------------------------------------------------------
    def write(self, rows: Sequence[Row], drafts: Mapping[str, tuple[str, float] | None] | None = None,
              deletions: Iterable[str] = ()) -> WriteResult:
        """Insert or replace rows, set or clear drafts, forget sessions: one transaction."""
        deletions = list(deletions)
        drafts = drafts or {}
        try:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sid in deletions:
                    conn.execute("DELETE FROM items WHERE session_id=?", (sid,))
                    conn.execute("DELETE FROM drafts WHERE session_id=?", (sid,))
                conn.executemany(
                    f"INSERT OR REPLACE INTO items (session_id, idx, {_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    [(sid, idx, it.kind.value, it.text, it.at, it.tool_call_id, it.tool_name,
                      it.tool_status, it.tool_detail, int(it.interrupted)) for sid, idx, it in rows])
                for sid, draft in drafts.items():
                    if draft is None:
                        conn.execute("DELETE FROM drafts WHERE session_id=?", (sid,))
                    else:
                        conn.execute("INSERT OR REPLACE INTO drafts (session_id, text, at) VALUES (?,?,?)",
                                     (sid, draft[0], draft[1]))
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        except Exception as exc:  # noqa: BLE001 - a cache never blocks a session (#276)
            return self._failed(exc, "writing")
        self._logged.discard("locked")
        return WriteResult.OK

    def replace_session(self, session_id: str, items: Sequence[ChatItem]) -> WriteResult:
        """Rewrite one session's rows as 0..n-1 (deletions run first in the same transaction)."""
        return self.write([(session_id, i, item) for i, item in enumerate(items)], deletions=[session_id])


class Store:
    """The registry and the history database of one state directory (0700)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        try:
            ensure_private_dir(self.state_dir)
        except OSError as exc:  # sessions still run; every write is retried and logged once
            log.error("cannot create the state directory %s: %s", self.state_dir, exc)
        self.registry = Registry(self.state_dir)
        self.history = HistoryDB(self.state_dir / HISTORY_FILE)

    def close(self) -> None:
        self.history.close()
