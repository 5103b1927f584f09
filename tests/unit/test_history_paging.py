"""history.db read a page at a time (real SQLite): how big each saved chat is and which tool
rows a killed run left open, without reading the rows; then any range of rows, in order."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.storage.history import HISTORY_FILE, Extent, HistoryDB
from polypilot_tui.storage.history_rows import OPEN_TOOLS
from tests.unit.test_store import items


def tool(status: str, n: int = 0) -> ChatItem:
    return ChatItem(ItemKind.TOOL, "", float(n), f"call-{n}", "bash", status)


def test_extents_say_how_many_rows_and_the_first_open_tool_without_reading_rows(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / HISTORY_FILE)
    rows = items(300)
    db.write([("long", i, item) for i, item in enumerate(rows)])
    db.write([("open", 0, items(1)[0]), ("open", 1, tool("running", 1)), ("open", 2, tool("waiting", 2))])
    db.write([("open", 3, tool("completed", 3)), ("other", 0, tool("completed"))])
    assert db.extents(["long", "open", "other", "nobody"]) == {
        "long": Extent(300, 300, None),
        "open": Extent(4, 4, 1),
        "other": Extent(1, 1, None),
    }
    assert db.extents(["open"]) == {"open": Extent(4, 4, 1)}  # only the ones asked for


def test_a_gap_is_seen_in_the_extent_and_a_full_load_renumbers_it(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / HISTORY_FILE)
    rows = items(3)
    db.write([("a", 0, rows[0]), ("a", 5, rows[1]), ("a", 9, rows[2])])
    (extent,) = db.extents(["a"]).values()  # type: ignore[union-attr]
    assert (extent.count, extent.next_index, extent.dense) == (3, 10, False)
    assert db.load("a") == rows
    assert db.extents(["a"]) == {"a": Extent(3, 3, None)}


def test_load_range_reads_any_page_in_order(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / HISTORY_FILE)
    rows = items(2000)
    # Written out of order, in two sessions interleaved: a page is still one session's, in order.
    db.write([("b", i, item) for i, item in reversed(list(enumerate(rows)))])
    db.write([("a", i, items(1)[0]) for i in range(50)])
    assert db.load_range("b", 1940, 2000) == rows[1940:]
    assert db.load_range("b", 0, 60) == rows[:60]
    assert db.load_range("b", 1990, 2100) == rows[1990:]  # clipped at the end
    assert db.load_range("b", 500, 500) == []
    assert db.load_range("nobody", 0, 60) == []
    pages = [row for start in range(0, 2000, 60) for row in db.load_range("b", start, start + 60) or []]
    assert pages == rows


def test_open_tool_rows_are_found_through_their_index(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / HISTORY_FILE)
    db.write([("a", 0, tool("running"))])
    db.close()
    conn = sqlite3.connect(tmp_path / HISTORY_FILE)
    plan = " ".join(
        str(row)
        for row in conn.execute(f"EXPLAIN QUERY PLAN SELECT session_id, MIN(idx) FROM items WHERE {OPEN_TOOLS}")
    )
    conn.close()
    assert "items_open_tools" in plan  # a restore does not scan every row for them


def test_a_database_made_before_the_index_gets_it_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    db = HistoryDB(path)
    rows = [*items(3), tool("running", 3)]
    db.write([("a", i, item) for i, item in enumerate(rows)])
    db.close()
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX items_open_tools")  # as an older version left it
    conn.commit()
    conn.close()
    db = HistoryDB(path)
    assert db.extents(["a"]) == {"a": Extent(4, 4, 3)}
    assert db.load_range("a", 0, 4) == rows
    db.close()
    conn = sqlite3.connect(path)
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    conn.close()
    assert "items_open_tools" in names


def test_an_unreadable_database_answers_none_not_empty(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / HISTORY_FILE)
    db.write([("a", 0, items(1)[0])])
    db.close()
    locker = sqlite3.connect(tmp_path / HISTORY_FILE, isolation_level=None)
    locker.execute("PRAGMA locking_mode=EXCLUSIVE")
    locker.execute("BEGIN EXCLUSIVE")
    locker.execute("COMMIT")  # the exclusive lock stays until it closes
    try:
        fresh = HistoryDB(tmp_path / HISTORY_FILE)
        assert fresh.extents(["a"]) is None  # unknown: a restore keeps the rows on disk, shows none
        assert fresh.load_range("a", 0, 1) is None
    finally:
        locker.close()
    assert HistoryDB(tmp_path / HISTORY_FILE).load_range("a", 0, 1) == items(1)
