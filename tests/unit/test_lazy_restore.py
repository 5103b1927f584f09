"""A restore reads chat rows from history.db only when they are looked at (then in the
background), and a lazily restored session keeps every row through sends, closes and undos.
Real SQLite, the demo agent, real time."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.history import PAGE, UNREADABLE
from polypilot_tui.engine import local, verbs
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import attach_persistence
from polypilot_tui.storage.history import HISTORY_FILE, HistoryDB
from polypilot_tui.storage.registry import SessionRecord
from tests.support.waiting import until
from tests.unit.test_persistence import App, db_rows, save_registry, texts
from tests.unit.test_store import lock_exclusively


async def saved_sessions(state: Path, count: int = 2) -> dict[str, list[tuple[int, str, str]]]:
    """``count`` sessions with a finished turn each, saved and closed: their rows by id."""
    app = App(state)
    rows = {}
    for n in range(count):
        sid = await app.manager.create_session("demo", f"s{n}")
        await app.manager.send(sid, f"look at the project {n}")
        await until(lambda sid=sid: app.manager.session(sid).turns, 10)
        rows[sid] = texts(app, sid)
    await app.close()
    return rows


def restarted(state: Path) -> App:
    """The app started again with its background read stopped: only looks read rows."""
    app = App(state)
    app.persistence.read_ahead.stop()
    return app


async def test_a_restore_reads_no_rows_until_they_are_looked_at(tmp_path: Path) -> None:
    saved = await saved_sessions(tmp_path)
    again = restarted(tmp_path)
    for sid, rows in saved.items():
        history = again.manager.session(sid).history
        assert history.unread == len(rows) == again.manager.view(sid).history_len
    first = next(iter(saved))
    assert again.manager.history(first)[-1].text == saved[first][-1][2]  # the newest: read now
    assert texts(again, first) == saved[first]
    other = again.manager.session(list(saved)[1]).history
    assert other.unread == len(saved[list(saved)[1]])  # the other one is still on disk
    await again.close()


async def test_the_background_read_brings_every_row_into_memory(tmp_path: Path) -> None:
    saved = await saved_sessions(tmp_path, 3)
    again = App(tmp_path)
    await until(lambda: again.persistence.read_ahead.done, 10)
    assert all(again.manager.session(sid).history.unread == 0 for sid in saved)
    assert {sid: texts(again, sid) for sid in saved} == saved
    await again.close()


async def test_rows_sent_before_any_was_read_are_saved_after_the_saved_ones(tmp_path: Path) -> None:
    saved = await saved_sessions(tmp_path, 1)
    sid = next(iter(saved))
    again = restarted(tmp_path)
    session = again.manager.session(sid)
    await again.manager.send(sid, "and one more")
    await until(lambda: len(session.turns) == 1, 10)
    assert session.history.unread > 0  # the new turn read nothing of the old ones
    await again.close()

    third = App(tmp_path)
    rows = texts(third, sid)
    assert rows[: len(saved[sid])] == saved[sid] and rows[len(saved[sid])][2] == "and one more"
    assert db_rows(tmp_path, sid) == rows
    await third.close()


async def test_undo_after_closing_a_session_no_row_of_which_was_read(tmp_path: Path) -> None:
    saved = await saved_sessions(tmp_path, 1)
    sid = next(iter(saved))
    again = restarted(tmp_path)
    closed = await again.manager.close(sid)
    assert closed is not None
    await until(lambda: db_rows(tmp_path, sid) == [], 3.0)  # the close deleted them on disk
    again.manager.reopen(closed)
    assert texts(again, sid) == saved[sid]
    await until(lambda: db_rows(tmp_path, sid) == saved[sid], 3.0)  # and the undo wrote them back
    await again.close()


async def test_a_long_session_opens_reading_a_page(tmp_path: Path) -> None:
    save_registry(tmp_path, SessionRecord("long", "long", "demo"))
    rows = [ChatItem(ItemKind.SYSTEM, f"note {i}", 1.0) for i in range(3000)]
    HistoryDB(tmp_path / HISTORY_FILE).write([("long", i, item) for i, item in enumerate(rows)])
    again = restarted(tmp_path)
    history = again.manager.session("long").history
    assert history[-20:] == rows[-20:] and history.unread == 3000 - PAGE
    assert list(history) == rows
    await again.close()


async def test_tool_rows_a_killed_run_left_open_are_settled_on_restore(tmp_path: Path) -> None:
    save_registry(tmp_path, SessionRecord("killed", "killed", "demo"), SessionRecord("calm", "calm", "demo"))
    running = ChatItem(ItemKind.TOOL, "", 1.0, "c1", "bash", "running", "make test")
    note = ChatItem(ItemKind.SYSTEM, "hello", 1.0)
    HistoryDB(tmp_path / HISTORY_FILE).write(
        [("killed", 0, note), ("killed", 1, running), ("calm", 0, note), ("calm", 1, note)]
    )
    again = restarted(tmp_path)
    assert again.manager.session("killed").history.unread == 0  # read at once: the restore changed it
    assert again.manager.session("calm").history.unread == 2
    assert again.manager.history("killed")[1].tool_status == "interrupted"
    await until(lambda: (db_rows(tmp_path, "killed") or [(0, "", "")])[-1:] == [(1, "tool", "")], 3.0)
    await again.close()


async def test_a_close_that_cannot_read_the_saved_rows_keeps_them_on_disk(tmp_path: Path) -> None:
    saved = await saved_sessions(tmp_path, 1)
    sid = next(iter(saved))
    again = restarted(tmp_path)
    path = tmp_path / HISTORY_FILE
    again.persistence.store.saved.close()  # its next read opens the file by name: gone for now
    path.rename(tmp_path / "away.db")
    try:
        closed = await again.manager.close(sid)
        assert closed is not None and closed.history.unread == len(saved[sid])
    finally:
        (tmp_path / "away.db").rename(path)
    await again.persistence.flush()
    assert db_rows(tmp_path, sid) == saved[sid]  # not deleted with the session
    again.manager.reopen(closed)  # the undo
    assert texts(again, sid) == saved[sid]
    await again.close()


async def damage(app: App, state: Path, in_place: bool) -> None:
    """history.db damaged under the running app: overwritten in place, or replaced (the old
    file moved away by someone, garbage put where it was)."""
    loop = asyncio.get_running_loop()
    # On the store's own thread (its connection is used there): a test-only reach.
    await loop.run_in_executor(app.persistence._io, app.persistence.store.history.close)  # noqa: SLF001
    path = state / HISTORY_FILE
    if not in_place:
        path.rename(state / "moved-away.db")
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"\0broken" * 1000)


async def long_session_then_damage(state: Path, in_place: bool) -> tuple[App, list[ChatItem]]:
    """A restored 3,000-row session of which only the newest page was read, then the file
    damaged and a new row written (the write finds the damage and starts a new file)."""
    save_registry(state, SessionRecord("long", "long", "demo"))
    rows = [ChatItem(ItemKind.SYSTEM, f"note {i}", 1.0) for i in range(3000)]
    db = HistoryDB(state / HISTORY_FILE)
    db.write([("long", i, item) for i, item in enumerate(rows)])
    db.close()
    app = restarted(state)
    assert app.manager.history("long")[-1] == rows[-1] and app.manager.session("long").history.unread == 2800
    await damage(app, state, in_place)
    sid = await app.manager.create_session("demo")
    await app.manager.send(sid, "after the damage")
    await until(lambda: app.manager.session(sid).turns, 10)
    await until(lambda: app.persistence.store.history.resets == 1, 3.0)
    await app.persistence.flush()
    return app, rows


@pytest.mark.expect_errors("history.db was unusable")
async def test_a_file_damaged_in_place_keeps_what_was_read_and_writes_no_placeholder(tmp_path: Path) -> None:
    app, rows = await long_session_then_damage(tmp_path, in_place=True)
    history = app.manager.session("long").history
    assert history[0] is UNREADABLE and history[-1] == rows[-1]  # shown as unreadable, never wrong
    on_disk = db_rows(tmp_path, "long")
    assert on_disk == [(i, "system", f"note {i}") for i in range(2800, 3000)]  # the rows read, where they were
    assert list(tmp_path.glob(f"{HISTORY_FILE}.corrupt-*"))  # the damaged file is kept aside (the user is told)
    await app.close()


@pytest.mark.expect_errors("history.db was unusable")
async def test_a_replaced_file_is_read_through_the_old_one_and_nothing_is_lost(tmp_path: Path) -> None:
    app, rows = await long_session_then_damage(tmp_path, in_place=False)
    assert list(app.manager.history("long")) == rows
    assert db_rows(tmp_path, "long") == [(i, "system", f"note {i}") for i in range(3000)]
    await app.close()


@pytest.mark.expect_errors("history cannot be saved .*: database is locked")
async def test_undo_after_closing_a_session_whose_history_could_not_be_read_at_start(tmp_path: Path) -> None:
    """Restored with history.db locked (shown empty, rows kept on disk), then closed and the
    close undone: the saved rows are neither deleted by the close nor written over by the undo."""
    saved = await saved_sessions(tmp_path, 1)
    sid = next(iter(saved))
    other = lock_exclusively(tmp_path / HISTORY_FILE)
    locked = App(tmp_path)
    assert sid in locked.persistence.restored.unloaded
    other.close()
    await locked.manager.send(sid, "while unread")
    await until(lambda: locked.manager.session(sid).turns, 10)
    closed = await locked.manager.close(sid)
    assert closed is not None
    await locked.persistence.flush()
    assert db_rows(tmp_path, sid)[: len(saved[sid])] == saved[sid]  # not deleted by the close
    locked.manager.reopen(closed)
    await locked.close()
    again = App(tmp_path)
    rows = [text for _, _, text in texts(again, sid)]
    assert rows[: len(saved[sid])] == [text for _, _, text in saved[sid]] and "while unread" in rows
    assert len(rows) == len(saved[sid]) + len(closed.history)  # the new rows once, after the saved ones
    await again.close()


@pytest.mark.expect_errors("history cannot be saved .*: database is locked")
async def test_a_close_while_the_write_that_finds_the_offset_flies_then_an_undo_writes_each_row_once(
    tmp_path: Path,
) -> None:
    """Restored while locked (its offset on disk unknown); closed while the write that finds
    the offset is on the store's thread; undone: the rows of this run are on disk once."""
    saved = await saved_sessions(tmp_path, 1)
    sid = next(iter(saved))
    other = lock_exclusively(tmp_path / HISTORY_FILE)
    app = App(tmp_path)
    assert sid in app.persistence.restored.unloaded
    other.close()
    # Test-only reach: hold the writer's first batch on its thread until the close is done.
    writer = app.persistence.history
    write, gate, batches = writer._write, threading.Event(), []  # noqa: SLF001

    def held(batch: Any) -> Any:
        batches.append(batch)
        if len(batches) == 1:
            gate.wait(10)
        return write(batch)

    writer._write = held  # type: ignore[method-assign]  # noqa: SLF001
    await app.manager.send(sid, "while unread")
    await until(lambda: app.manager.session(sid).turns, 10)
    await until(lambda: batches, 5)
    assert batches[0].offsets.get(sid, "none") is None  # this write finds the offset
    closed = await app.manager.close(sid)
    gate.set()
    await app.persistence.flush()
    app.manager.reopen(closed)
    await app.persistence.flush()
    await app.close()
    assert len(db_rows(tmp_path, sid)) == len(saved[sid]) + len(closed.history)


async def test_rows_kept_for_an_undo_are_deleted_at_quit_when_none_came(tmp_path: Path) -> None:
    saved = await saved_sessions(tmp_path, 1)
    sid = next(iter(saved))
    again = restarted(tmp_path)
    path = tmp_path / HISTORY_FILE
    again.persistence.store.saved.close()
    path.rename(tmp_path / "away.db")
    try:
        assert await again.manager.close(sid) is not None
    finally:
        (tmp_path / "away.db").rename(path)
    await again.persistence.flush()
    assert db_rows(tmp_path, sid) == saved[sid]  # kept while an undo may come
    await again.close()
    assert db_rows(tmp_path, sid) == []  # the quit ends the undo: the close is carried out


async def test_rows_kept_for_an_undo_go_when_the_session_leaves_the_engines_closed_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = await saved_sessions(tmp_path, 1)
    sid = next(iter(saved))
    settings = Settings.read(None, state_dir=tmp_path, demo_speed=20.0)
    engine = LocalEngine(SessionManager(settings, load_agents(None), SystemClock()), attach_persistence)
    await engine.start()
    assert engine.persistence is not None
    engine.persistence.read_ahead.stop()
    monkeypatch.setattr(local, "KEEP_CLOSED", 0)  # no room for an undo: it leaves the list at once
    path = tmp_path / HISTORY_FILE
    engine.persistence.store.saved.close()
    path.rename(tmp_path / "away.db")
    try:
        assert await engine.call(verbs.CLOSE, verbs.SessionRef(sid))  # its rows could not be read: kept for an undo...
    finally:
        (tmp_path / "away.db").rename(path)
    await engine.persistence.flush()
    assert db_rows(tmp_path, sid) == []  # ...that can no longer come: deleted
    await engine.close()
