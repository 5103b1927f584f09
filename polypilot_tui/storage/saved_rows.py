"""Reading saved chat rows on demand: how many each session has, and a range of them.

A restore asks only for each session's extent (one grouped query); a session's rows are read
when something first looks at them (domain/history.py). That happens on the event loop
while the history writer may be writing on its own thread, so reads use their own read-only
connection: SQLite's WAL lets it read committed rows while the writer writes. Any failure is
an answer of None (the caller reads again later, or falls back to reading everything), never
an exception.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.infra.private import private_database

log = logging.getLogger(__name__)

COLUMNS = "kind, text, at, tool_call_id, tool_name, tool_status, tool_detail, interrupted"
"""The row columns after (session_id, idx), in the order :func:`item_of_row` takes them."""
OPEN_TOOL = "tool_status IN ('running', 'waiting')"
"""A tool row a killed run left open (history.db has a partial index on it)."""
IDS_PER_QUERY = 500
"""Session ids in one query (SQLite before 3.32 allows 999 parameters)."""
_KINDS = {k.value: k for k in ItemKind}


def id_chunks(session_ids: list[str]) -> Iterator[tuple[list[str], str]]:
    """The ids a few hundred at a time, each with its ``?,?,…`` for an ``IN (…)`` clause."""
    for start in range(0, len(session_ids), IDS_PER_QUERY):
        chunk = session_ids[start : start + IDS_PER_QUERY]
        yield chunk, ",".join("?" * len(chunk))


def item_of_row(row: Sequence[Any]) -> ChatItem:
    """A ChatItem from the :data:`COLUMNS` of one row (unknown kinds become system rows)."""
    kind, text, at, call_id, tool_name, tool_status, tool_detail, interrupted = row
    return ChatItem(
        _KINDS.get(kind, ItemKind.SYSTEM),
        _text(text),
        at if isinstance(at, float) else float(at) if isinstance(at, int) else 0.0,
        _text(call_id) or None,
        _text(tool_name),
        _text(tool_status),
        _text(tool_detail),
        bool(interrupted),
    )


def _text(value: Any) -> str:
    """A text column as text: another type (a file edited by hand) is shown, never raised."""
    return value if isinstance(value, str) else "" if value is None else str(value)


class Extent(NamedTuple):
    """What a session has on disk, without its rows."""

    rows: int
    end: int
    """One past the highest index (``rows`` unless there are gaps)."""
    open_tools: bool
    """Some tool row is still running or waiting (a killed run)."""


class SavedRows:
    """Read-only access to ``history.db`` for extents and row ranges (one thread at a time)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self.last_error = ""
        """Why the last read failed ("" after a success)."""

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            private_database(self.path, create=False)  # SQLite follows links: those are refused first
            # mode=ro: never creates the file, never writes; a missing file is an error.
            # timeout=0: a locked file is an answer now (on the loop), not a wait.
            self._conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=0, check_same_thread=False)
        return self._conn

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def _failed(self, exc: sqlite3.Error | OSError, what: str) -> None:
        self.last_error = str(exc) or type(exc).__name__
        log.warning("history.db: %s failed: %s", what, self.last_error)
        self.close()  # the next read opens the file afresh (it may have been replaced)

    def extents(self, session_ids: Iterable[str]) -> dict[str, Extent] | None:
        """Each session's extent (sessions without rows are missing); None when unreadable."""
        wanted = list(dict.fromkeys(session_ids))
        found: dict[str, Extent] = {}
        try:
            conn = self._connect()
            for chunk, marks in id_chunks(wanted):
                open_ids = {
                    sid
                    for (sid,) in conn.execute(
                        f"SELECT DISTINCT session_id FROM items WHERE {OPEN_TOOL} AND session_id IN ({marks})", chunk
                    )
                }
                query = f"SELECT session_id, COUNT(*), MAX(idx) FROM items WHERE session_id IN ({marks})"
                for sid, count, top in conn.execute(f"{query} GROUP BY session_id", chunk):
                    found[sid] = Extent(int(count), int(top) + 1, sid in open_ids)
        except (sqlite3.Error, OSError) as exc:  # the caller reads everything the old way instead
            self._failed(exc, "reading session extents")
            return None
        self.last_error = ""
        return found

    def read(self, session_id: str, start: int, stop: int) -> list[ChatItem] | None:
        """Rows ``start <= idx < stop`` of one session, in order; None when unreadable now."""
        try:
            query = f"SELECT {COLUMNS} FROM items WHERE session_id=? AND idx>=? AND idx<? ORDER BY idx"
            items = [item_of_row(row) for row in self._connect().execute(query, (session_id, start, stop))]
        except (sqlite3.Error, OSError) as exc:  # shown as unreadable rows, read again later
            self._failed(exc, f"reading rows of {session_id}")
            return None
        self.last_error = ""
        return items

    def prompts(self, session_id: str, limit: int = 100) -> list[str] | None:
        """The text of the user's first ``limit`` prompts in one session, in order (as saved:
        redacted); None when unreadable now."""
        try:
            query = "SELECT text FROM items WHERE session_id=? AND kind=? ORDER BY idx LIMIT ?"
            rows = self._connect().execute(query, (session_id, ItemKind.USER.value, limit)).fetchall()
        except (sqlite3.Error, OSError) as exc:  # a draft without the prompts, never a failure
            self._failed(exc, f"reading prompts of {session_id}")
            return None
        self.last_error = ""
        return [_text(text) for (text,) in rows]
