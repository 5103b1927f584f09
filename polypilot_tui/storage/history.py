"""Chat history, ``state_dir/history.db``: a write-through SQLite cache (PolyPilot #276).

Every failure is caught and classified, never raised: a locked database or a failing disk
(full, read-only) is retried later with nothing lost (:attr:`WriteResult.RETRY`, the reason
in :attr:`HistoryDB.last_error`); a file that is not a usable history database (corrupt,
another schema, a folder in its place) is moved aside and a new one started
(:attr:`WriteResult.RESET`, the move in :attr:`HistoryDB.moved`). A database that cannot
be opened for writing is still read (read-only), so a restore shows what was saved.

One writer: the database records which app owns it (a token per run). A writer whose
token is no longer the owner's gets :attr:`WriteResult.FENCED` and stops, so two writers
on one folder can never overwrite each other's rows. Every text of a row goes through the
redactor (:meth:`~polypilot_tui.infra.redact.Redactor.scrub`: all fields, whatever they are).

Not thread-safe: use it from one thread at a time (the app uses one I/O thread).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.infra.private import move_aside, private_database
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.storage.saved_rows import COLUMNS, OPEN_TOOL, id_chunks, item_of_row

log = logging.getLogger(__name__)

HISTORY_FILE = "history.db"
SCHEMA_VERSION = 2


class WriteResult(StrEnum):
    """How a history write went."""

    OK = "ok"
    RETRY = "retry"
    """Locked, busy, full, read-only or another I/O error: nothing was written; try the same batch later."""
    RESET = "reset"
    """The database was unusable and has been replaced by an empty one: write everything again."""
    FENCED = "fenced"
    """Another app took the database over: this one must stop writing (nothing was written)."""
    DROPPED = "dropped"
    """An unexpected error: the batch is lost (logged)."""


_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS items (
    session_id TEXT NOT NULL, idx INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL,
    at REAL NOT NULL, tool_call_id TEXT, tool_name TEXT NOT NULL DEFAULT '',
    tool_status TEXT NOT NULL DEFAULT '', tool_detail TEXT NOT NULL DEFAULT '',
    interrupted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (session_id, idx));
CREATE TABLE IF NOT EXISTS drafts (
    session_id TEXT PRIMARY KEY, text TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS owner (id INTEGER PRIMARY KEY CHECK (id = 1), token TEXT NOT NULL);
-- A restore reads no rows, only which sessions a killed run left with an open tool row.
CREATE INDEX IF NOT EXISTS items_open_tools ON items(session_id) WHERE {OPEN_TOOL};
"""
_REQUIRED = {
    "items": {"session_id", "idx", *COLUMNS.replace(" ", "").split(",")},
    "drafts": {"session_id", "text", "at"},
    "owner": {"id", "token"},
}
_READ_ONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)

Row = tuple[str, int, ChatItem]
"""(session id, index in the database, item)."""


class _Unusable(Exception):
    """The file is there but is not a history database this app can use."""


_STORE_ERRORS = (sqlite3.Error, OSError, _Unusable)
"""How the database fails: SQLite's errors, the file's (a link, a folder, a full disk), or a
file that is not ours. :meth:`HistoryDB._failed` sorts them; anything else is a bug."""


def _is_locked(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _is_corrupt(exc: BaseException) -> bool:
    # Only SQLITE_CORRUPT / SQLITE_NOTADB: a binding bug must never move the user's file aside.
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    return name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in text or "not a database" in text


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


class HistoryDB:
    """``state_dir/history.db``: chat rows keyed by (session id, index), plus streaming drafts."""

    def __init__(self, path: Path, busy_timeout: float = 0.0, owner: str = "") -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.owner = owner
        """This writer's token ("" never claims: a reader, or a test)."""
        self._conn: sqlite3.Connection | None = None
        self.read_only = False
        """The open connection can only read (the file or its folder is not writable)."""
        self._claimed = False
        self._logged: set[str] = set()
        self.resets = 0
        self.last_error = ""
        """Why the last failed read or write failed ("" after a success)."""
        self.moved: list[str] = []
        """One sentence per file moved aside (drained by the caller to tell the user)."""

    # ---- connection -----------------------------------------------------------------
    def _log_once(self, key: str, message: str, *args: Any, level: int = logging.WARNING) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.log(level, message, *args)

    def _connect(self, write: bool = False) -> sqlite3.Connection:
        if self._conn is not None and not (write and self.read_only):
            return self._conn
        self.close()
        if self.path.is_dir():
            raise _Unusable("it is a folder, not a database")
        try:
            # Made by us first, so they are 0600 from their first byte and never a link's target.
            private_database(self.path, create=True)
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
            self._prepare(conn)
            self.read_only = False
        except (OSError, sqlite3.OperationalError) as exc:
            if write or not self._read_only_error(exc):
                raise
            conn = self._open_read_only(exc)
        self._conn = conn
        self._logged.discard("locked")
        return conn

    @staticmethod
    def _read_only_error(exc: BaseException) -> bool:
        if isinstance(exc, OSError):
            return exc.errno in _READ_ONLY_ERRNOS
        text = str(exc).lower()
        return "readonly" in text or "read-only" in text or "unable to open" in text

    def _open_read_only(self, cause: BaseException) -> sqlite3.Connection:
        """Read what is there although it cannot be written (a read-only mount)."""
        if not self.path.exists():
            raise cause
        private_database(self.path, create=False)
        for query in ("mode=ro", "mode=ro&immutable=1"):  # immutable: no -shm can be created
            try:
                conn = sqlite3.connect(
                    f"file:{self.path}?{query}",
                    uri=True,
                    timeout=self.busy_timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
                self._check_schema(conn)
                conn.execute("SELECT 1 FROM items LIMIT 1").fetchall()
            except sqlite3.OperationalError:
                continue
            self.read_only = True
            return conn
        raise cause

    def _prepare(self, conn: sqlite3.Connection) -> None:
        try:
            self._check_schema(conn)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL: durable at checkpoints, never torn
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except BaseException:
            conn.close()
            raise

    @staticmethod
    def _check_schema(conn: sqlite3.Connection) -> None:
        """Refuse a database this app did not make (or a newer version did)."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise _Unusable(f"it was made by a newer version (schema {version})")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for table, columns in _REQUIRED.items():
            if table in tables:
                have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
                if not columns <= have:
                    raise _Unusable(f"its {table} table has another schema")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def _reset(self, why: str) -> None:
        """The file is not a usable database: move it aside and start a new one."""
        self.close()
        self.resets += 1
        self._claimed = False
        target = move_aside(self.path, why)
        if target is not None:
            self.moved.append(
                f"{self.path} could not be used ({why}); it was moved to {target} and a new "
                "history database was started"
            )
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(f"{self.path}{suffix}")

    def _failed(self, exc: BaseException, what: str) -> WriteResult:
        self.last_error = _reason(exc)
        if isinstance(exc, _Unusable) or _is_corrupt(exc):
            self._reset(str(exc) if isinstance(exc, _Unusable) else "not a valid SQLite database")
            return WriteResult.RESET
        if _is_locked(exc):
            self._log_once("locked", "history database is locked (%s); will retry", what)
            return WriteResult.RETRY
        if isinstance(exc, (sqlite3.OperationalError, OSError)):
            self._log_once(f"io:{self.last_error}", "history database unavailable (%s): %s", what, exc)
            self.close()
            return WriteResult.RETRY
        # IntegrityError, ProgrammingError …: a statement of ours is wrong, and the rows are lost.
        self._log_once(f"bug:{type(exc).__name__}", "history database failed (%s): %r", what, exc, level=logging.ERROR)
        return WriteResult.DROPPED

    # ---- reads ----------------------------------------------------------------------
    def load_many(self, session_ids: Iterable[str]) -> dict[str, list[ChatItem]]:
        """History of each session; ids that could not be read are missing from the result."""
        wanted = list(dict.fromkeys(session_ids))
        rows: dict[str, list[Sequence[Any]]] = {sid: [] for sid in wanted}
        try:  # a few queries, not one per session (200 of them were a tenth of a start)
            conn = self._connect()
            for chunk, marks in id_chunks(wanted):
                query = (
                    f"SELECT session_id, idx, {COLUMNS} FROM items"
                    f" WHERE session_id IN ({marks}) ORDER BY session_id, idx"
                )
                for row in conn.execute(query, chunk):
                    rows[row[0]].append(row[1:])
        except _STORE_ERRORS:  # one session at a time says what failed, and how
            result = {}
            for sid in wanted:
                if (items := self.load(sid)) is not None:
                    result[sid] = items
            return result
        return {sid: items for sid in wanted if (items := self._items_of(sid, rows[sid])) is not None}

    def load(self, session_id: str) -> list[ChatItem] | None:
        """One session's rows in order (None when the database cannot be read now)."""
        try:
            conn = self._connect()
            rows = conn.execute(
                f"SELECT idx, {COLUMNS} FROM items WHERE session_id=? ORDER BY idx", (session_id,)
            ).fetchall()
        except _STORE_ERRORS as exc:  # a cache never blocks a session (#276)
            # After a reset the new database is known to be empty; otherwise: unknown.
            return [] if self._failed(exc, f"loading {session_id}") is WriteResult.RESET else None
        return self._items_of(session_id, rows)

    def _items_of(self, session_id: str, rows: Sequence[Sequence[Any]]) -> list[ChatItem] | None:
        """The items of (idx, columns…) rows in order; gaps are renumbered away (None if that fails)."""
        items = [item_of_row(row[1:]) for row in rows]
        if any(row[0] != i for i, row in enumerate(rows)) and not self.read_only:
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
        except _STORE_ERRORS as exc:
            return {} if self._failed(exc, "loading drafts") is WriteResult.RESET else None
        return {sid: (text, float(at)) for sid, text, at in rows if sid in wanted and text}

    def next_index(self, session_id: str) -> int | None:
        """One past the highest stored index (0 when none; None when unreadable now)."""
        try:
            row = self._connect().execute("SELECT MAX(idx) FROM items WHERE session_id=?", (session_id,)).fetchone()
        except _STORE_ERRORS as exc:
            return 0 if self._failed(exc, f"reading {session_id}") is WriteResult.RESET else None
        return 0 if row is None or row[0] is None else int(row[0]) + 1

    # ---- writes ---------------------------------------------------------------------
    def write(
        self,
        rows: Sequence[Row],
        drafts: Mapping[str, tuple[str, float] | None] | None = None,
        deletions: Iterable[str] = (),
    ) -> WriteResult:
        """Insert or replace rows, set or clear drafts, forget sessions: one transaction."""
        deletions = list(deletions)
        # Every field of every row, whatever fields a ChatItem grows (a tool's title, its
        # arguments, a new column …); a draft ends wherever the stream was: inside a secret, maybe.
        rows = REDACTOR.scrub(rows)
        drafts = {sid: None if d is None else (REDACTOR.fragment(d[0]), d[1]) for sid, d in (drafts or {}).items()}
        try:
            conn = self._connect(write=True)
            conn.execute("BEGIN IMMEDIATE")
            try:
                if not self._own(conn):
                    conn.execute("ROLLBACK")
                    self.last_error = "another polypilot took this history database over"
                    return WriteResult.FENCED
                for sid in deletions:
                    conn.execute("DELETE FROM items WHERE session_id=?", (sid,))
                    conn.execute("DELETE FROM drafts WHERE session_id=?", (sid,))
                conn.executemany(
                    f"INSERT OR REPLACE INTO items (session_id, idx, {COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    [
                        (
                            sid,
                            idx,
                            it.kind.value,
                            it.text,
                            it.at,
                            it.tool_call_id,
                            it.tool_name,
                            it.tool_status,
                            it.tool_detail,
                            int(it.interrupted),
                        )
                        for sid, idx, it in rows
                    ],
                )
                for sid, draft in drafts.items():
                    if draft is None:
                        conn.execute("DELETE FROM drafts WHERE session_id=?", (sid,))
                    else:
                        conn.execute(
                            "INSERT OR REPLACE INTO drafts (session_id, text, at) VALUES (?,?,?)",
                            (sid, draft[0], draft[1]),
                        )
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        except _STORE_ERRORS as exc:  # a cache never blocks a session (#276)
            return self._failed(exc, "writing")
        self._logged.discard("locked")
        self.last_error = ""
        return WriteResult.OK

    def _own(self, conn: sqlite3.Connection) -> bool:
        """Inside the write transaction: claim the database on this run's first write, and
        afterwards check that nobody else has claimed it since."""
        if not self.owner:
            return True
        if not self._claimed:
            conn.execute("INSERT OR REPLACE INTO owner (id, token) VALUES (1, ?)", (self.owner,))
            self._claimed = True
            return True
        row = conn.execute("SELECT token FROM owner WHERE id=1").fetchone()
        return row is None or row[0] == self.owner

    def claim(self) -> WriteResult:
        """Take the database over now (at start), so an older writer stops at its next write."""
        return self.write([])

    def replace_session(self, session_id: str, items: Sequence[ChatItem]) -> WriteResult:
        """Rewrite one session's rows as 0..n-1 (deletions run first in the same transaction)."""
        return self.write([(session_id, i, item) for i, item in enumerate(items)], deletions=[session_id])
