"""What ``history.db`` holds and how its rows and errors read: the schema, a row as a
:class:`ChatItem`, and which SQLite failures mean locked, corrupt or a plain I/O error."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from polypilot_tui.domain.chat import ChatItem, ItemKind

SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    session_id TEXT NOT NULL, idx INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL,
    at REAL NOT NULL, tool_call_id TEXT, tool_name TEXT NOT NULL DEFAULT '',
    tool_status TEXT NOT NULL DEFAULT '', tool_detail TEXT NOT NULL DEFAULT '',
    interrupted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (session_id, idx));
CREATE TABLE IF NOT EXISTS drafts (
    session_id TEXT PRIMARY KEY, text TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS owner (id INTEGER PRIMARY KEY CHECK (id = 1), token TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS items_open_tools ON items (session_id, idx) WHERE tool_status IN ('running', 'waiting');
"""
# The partial index holds only tool rows a killed run left open: a restore finds them
# without reading every row (they are settled, or re-armed, before anything else).
OPEN_TOOLS = "tool_status IN ('running', 'waiting')"
"""The WHERE of that index, word for word (SQLite uses it only for this exact term)."""
COLUMNS = "kind, text, at, tool_call_id, tool_name, tool_status, tool_detail, interrupted"
REQUIRED = {
    "items": {"session_id", "idx", *COLUMNS.replace(" ", "").split(",")},
    "drafts": {"session_id", "text", "at"},
    "owner": {"id", "token"},
}
_KINDS = {k.value: k for k in ItemKind}


def item_from_row(row: Sequence[Any]) -> ChatItem:
    """The :class:`ChatItem` of one row's :data:`COLUMNS`."""
    kind, text, at, call_id, tool_name, tool_status, tool_detail, interrupted = row
    return ChatItem(
        _KINDS.get(kind, ItemKind.SYSTEM),
        text or "",
        float(at or 0.0),
        call_id or None,
        tool_name or "",
        tool_status or "",
        tool_detail or "",
        bool(interrupted),
    )


def is_locked(exc: BaseException) -> bool:
    """Another connection holds the database (retry later)."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def is_corrupt(exc: BaseException) -> bool:
    """The file is not a usable SQLite database."""
    # Only SQLITE_CORRUPT / SQLITE_NOTADB: a binding bug must never move the user's file aside.
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    return name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in text or "not a database" in text


def reason(exc: BaseException) -> str:
    """Why, in words (for a notice)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__
