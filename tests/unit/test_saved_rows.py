"""Saved rows read on demand (storage/saved_rows.py), on real SQLite beside a writing HistoryDB."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.storage.history import HISTORY_FILE, HistoryDB, WriteResult
from polypilot_tui.storage.saved_rows import Extent, SavedRows
from tests.unit.test_store import held_exclusively, items


def edit_by_hand(path: Path, statement: str) -> None:
    """Change the file as another program (or a person with the sqlite3 shell) would."""
    conn = sqlite3.connect(path)
    conn.execute(statement)
    conn.commit()
    conn.close()


def test_extents_say_rows_gaps_and_open_tools_without_reading_rows(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / HISTORY_FILE)
    open_tool = ChatItem(ItemKind.TOOL, "", 1.0, "c1", "bash", "running")
    waiting = ChatItem(ItemKind.TOOL, "", 1.0, "c2", "bash", "waiting")
    rows = items(30)
    db.write([("plain", i, item) for i, item in enumerate(rows)])
    db.write([("gappy", 0, rows[0]), ("gappy", 4, rows[1])])
    db.write([("killed", 0, rows[0]), ("killed", 1, open_tool), ("asking", 0, waiting)])
    saved = SavedRows(tmp_path / HISTORY_FILE)
    ids = ["plain", "gappy", "killed", "asking", "empty"]
    assert saved.extents(ids) == {
        "plain": Extent(30, 30, False),
        "gappy": Extent(2, 5, False),
        "killed": Extent(2, 2, True),
        "asking": Extent(1, 1, True),
    }
    assert saved.read("plain", 10, 13) == rows[10:13] and saved.read("plain", 28, 40) == rows[28:]
    plan = " ".join(
        str(row)
        for row in sqlite3.connect(tmp_path / HISTORY_FILE).execute(
            "EXPLAIN QUERY PLAN SELECT DISTINCT session_id FROM items"
            " WHERE tool_status IN ('running', 'waiting') AND session_id IN ('a')"
        )
    )
    assert "items_open_tools" in plan  # a big history.db is not scanned for them


def test_an_older_database_gets_the_open_tool_index(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    HistoryDB(path).write([("a", 0, items(1)[0])])
    edit_by_hand(path, "DROP INDEX items_open_tools")
    assert HistoryDB(path).write([]) is WriteResult.OK
    names = [r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='index'")]
    assert "items_open_tools" in names


def test_rows_are_read_while_the_writer_holds_its_transaction(tmp_path: Path) -> None:
    """WAL: the loop reads committed rows while the store's thread is inside a write."""
    path = tmp_path / HISTORY_FILE
    db = HistoryDB(path)
    rows = items(10)
    db.write([("a", i, item) for i, item in enumerate(rows)])
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("DELETE FROM items WHERE session_id='a'")  # not committed yet
        inside.set()
        release.wait(10)
        writer.execute("ROLLBACK")

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert inside.wait(10)
        saved = SavedRows(path)
        assert saved.read("a", 0, 10) == rows
        assert saved.extents(["a"]) == {"a": Extent(10, 10, False)}
    finally:
        release.set()
        thread.join()
        writer.close()


def test_missing_or_locked_files_answer_none_and_the_next_read_tries_again(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    saved = SavedRows(path)
    assert saved.extents(["a"]) is None and saved.read("a", 0, 1) is None
    assert not path.exists()  # a reader never creates the file
    other = held_exclusively(path)
    assert saved.read("a", 0, 1) is None and saved.last_error
    other.close()
    assert saved.read("a", 0, 1) == items(1) and saved.last_error == ""


def test_a_row_edited_by_hand_with_values_of_other_types_is_shown_not_raised(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    HistoryDB(path).write([("a", 0, items(1)[0])])
    edit_by_hand(path, "UPDATE items SET text=42, at='yesterday', tool_call_id=7 WHERE session_id='a'")
    (row,) = SavedRows(path).read("a", 0, 1) or [None]
    assert row is not None and (row.text, row.at, row.tool_call_id) == ("42", 0.0, "7")
