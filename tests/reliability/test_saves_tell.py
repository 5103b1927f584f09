"""Issue #11.4: saves never fail silently, and what could not be saved is not lost.

Real SQLite, real files, and real mounts: a read-only bind mount of the state folder and a
small tmpfs that fills up. Each case checks the notice the user gets (the reason and the
path, once), and that every row ends up saved once the store can be written again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import re
import sqlite3
import time
from pathlib import Path

import pytest

from polypilot_tui.engine.persistence import QUIT_NOTES, attach_persistence
from polypilot_tui.storage.registry import Registry, SessionRecord
from tests.reliability.conftest import App, Dashboard, Mounts, clean_env, db_texts
from tests.support.waiting import until, until_blocking
from tests.ui.helpers import demo_app, notifications, toasts, wait_for


# ---- a read-only state folder ------------------------------------------------------------
@pytest.mark.expect_errors(
    "Chat history cannot be saved .*: read-only file system", "session list cannot be saved .*: Read-only file system"
)
async def test_a_read_only_state_folder_restores_the_history_and_says_it_cannot_save(
    tmp_path: Path, mounts: Mounts
) -> None:
    state = tmp_path / "state"
    first = App(state)
    sid = await first.manager.create_session("demo", "kept")
    await first.turn(sid, "hello before the folder became read-only")
    before = first.texts(sid)
    await first.close()

    mounts.read_only(state)
    app = App(state)
    assert app.texts(sid) == before  # shown, not "No messages yet"
    await until(lambda: app.notices("cannot be saved", str(state)), what="a notice that nothing can be saved")
    assert app.notices("Chat history cannot be saved", str(state / "history.db"), "read")
    await app.turn(sid, "written while read-only")
    await asyncio.sleep(1.0)
    assert len(app.notices("Chat history cannot be saved")) == 1  # told once, not at every retry
    mounts.writable(state)
    await until(lambda: db_texts(state, sid) == app.texts(sid), 20, "the rows kept in memory to be saved")
    await until(lambda: app.notices("saved again"), what="the notice that saving works again")
    await app.close()


# ---- a history database that cannot be used ------------------------------------------------
@pytest.mark.expect_errors("history.db was unusable")
@pytest.mark.parametrize("broken", ["another-schema", "a-folder"])
async def test_an_unusable_history_database_is_moved_aside_with_a_notice_and_nothing_is_lost(
    tmp_path: Path, broken: str
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    Registry(state).save([SessionRecord("s1", "restored", "demo")], time.time())
    if broken == "a-folder":
        (state / "history.db").mkdir()
        (state / "history.db" / "note.txt").write_text("someone's folder")
    else:
        conn = sqlite3.connect(state / "history.db")
        conn.execute("CREATE TABLE items (session_id TEXT, idx INTEGER, body TEXT)")
        conn.execute("INSERT INTO items VALUES ('s1', 0, 'a row of another program')")
        conn.commit()
        conn.close()
    app = App(state)
    moved = app.notices(str(state / "history.db"), "moved to")
    assert moved, app.told
    kept = Path(moved[0].split("moved to ", 1)[1].split(" and ", 1)[0])
    assert kept.exists() and kept.name.startswith("history.db.corrupt-")
    if broken == "a-folder":
        assert (kept / "note.txt").read_text() == "someone's folder"  # moved, never deleted
    await app.turn("s1", "saved in the new database")
    await until(lambda: db_texts(state, "s1") == app.texts("s1"), what="the new rows on disk")
    await app.close()


@pytest.mark.expect_errors(r"sessions.json was unusable \(line 1: nested deeper")
async def test_a_deeply_nested_session_list_is_moved_aside_and_saving_goes_on(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "sessions.json").write_text('{"sessions": ' + "[" * 100_000 + "]" * 100_000 + "}")
    app = App(state)
    assert app.notices("session list could not be used", "nested deeper than 64 levels", "moved to"), app.told
    assert list(state.glob("sessions.json.corrupt-*"))
    sid = await app.manager.create_session("demo", "new one")
    await until(
        lambda: (
            (state / "sessions.json").exists()
            and sid in [s["id"] for s in json.loads((state / "sessions.json").read_text())["sessions"]]
        ),
        what="the new session in the registry",
    )
    await app.close()


# ---- a full disk --------------------------------------------------------------------------
TOAST_WORDS = re.compile(r"database.{0,120}?or.{0,120}?disk.{0,120}?is.{0,120}?full", re.S)
"""The full-disk toast's words in order (cells of a redraw may stand between its wrapped lines)."""


def fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` to the last byte; returns the filler file."""
    filler = folder / "filler"
    # Unbuffered: a buffered file kept what did not fit and raised ENOSPC again at its close.
    with open(filler, "wb", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 65536)
    with open(filler, "ab", buffering=0) as fh, contextlib.suppress(OSError):  # the last few bytes
        while True:
            fh.write(b"\0")
    return filler


@pytest.mark.expect_errors(
    "Chat history cannot be saved .*: database or disk is full",
    "session list cannot be saved .*: No space left on device",
)
async def test_a_full_disk_is_told_once_and_the_waiting_rows_are_saved_when_space_returns(
    tmp_path: Path, mounts: Mounts
) -> None:
    state = mounts.tmpfs(tmp_path / "state", "4m")
    app = App(state)
    sid = await app.manager.create_session("demo", "on a small disk")
    await app.turn(sid, "a first question")
    await until(lambda: db_texts(state, sid) == app.texts(sid), what="the first rows")
    filler = fill(state)
    for i in range(3):
        await app.turn(sid, f"question {i} on a full disk: " + "x" * 20_000)
    await until(lambda: app.notices("cannot be saved", "disk is full"), what="the full-disk notice")
    assert db_texts(state, sid) != app.texts(sid)
    await asyncio.sleep(1.0)
    assert len(app.notices("Chat history cannot be saved")) == 1
    filler.unlink()
    await until(lambda: db_texts(state, sid) == app.texts(sid), 20, "every waiting row to be saved")
    await until(lambda: app.notices("Chat history is saved again"), what="the saved-again notice")
    await app.close()


@pytest.mark.expect_errors(
    "Chat history cannot be saved .*: database or disk is full",
    "session list cannot be saved .*: No space left on device",
    "could not be saved .*they were kept in",
)
async def test_quitting_on_a_full_disk_keeps_the_rows_and_the_next_start_writes_them_back(
    tmp_path: Path, mounts: Mounts, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "runtime"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    state = mounts.tmpfs(tmp_path / "state", "4m")
    app = App(state)
    sid = await app.manager.create_session("demo", "quits while full")
    await app.turn(sid, "saved before the disk filled")
    await until(lambda: db_texts(state, sid) == app.texts(sid), what="the first rows")
    filler = fill(state)
    late = await app.manager.create_session("demo", "created while full")
    await app.turn(sid, "written while full: " + "y" * 30_000)
    await app.turn(late, "a prompt in the new session")
    everything = {sid: app.texts(sid), late: app.texts(late)}
    await until(lambda: app.notices("disk is full"), what="the full-disk notice")
    QUIT_NOTES.clear()
    await app.close()
    assert (
        len(QUIT_NOTES) == 1 and "were kept in" in QUIT_NOTES[0] and "written back at the next start" in QUIT_NOTES[0]
    )
    spills = list(runtime.rglob("unsaved-*.json"))
    assert len(spills) == 1 and (spills[0].stat().st_mode & 0o777) == 0o600, spills
    QUIT_NOTES.clear()

    filler.unlink()
    again = App(state)
    assert again.notices("written back", str(spills[0])), again.told
    assert {s: again.texts(s) for s in (sid, late)} == everything  # both sessions, every row
    await again.close()
    assert db_texts(state, sid) == everything[sid] and db_texts(state, late) == everything[late]
    assert not spills[0].exists()


def test_fill_really_fills_the_disk(tmp_path: Path, mounts: Mounts) -> None:
    """The full-disk tests above are only as good as this helper."""
    state = mounts.tmpfs(tmp_path / "small", "1m")
    fill(state)
    with pytest.raises(OSError) as info, open(state / "more", "wb") as fh:
        fh.write(b"x" * 8192)
        fh.flush()
        os.fsync(fh.fileno())
    assert info.value.errno == errno.ENOSPC


# ---- the dashboard shows them --------------------------------------------------------------
@pytest.mark.expect_errors(r"history.db was unusable \(it is a folder")
async def test_the_dashboard_shows_each_saving_problem_once_as_a_toast(tmp_path: Path) -> None:
    (tmp_path / "history.db").mkdir(parents=True)
    app = demo_app(tmp_path, attach=attach_persistence)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(
            pilot,
            lambda: any("history.db could not be used" in n for n in notifications(app)),
            what="the moved-aside notice",
        )
        shown = [n for n in notifications(app) if "history.db" in n]
        assert len(shown) == 1 and shown[0].startswith("Saving:") and str(tmp_path / "history.db") in shown[0]
        assert [n.severity for n in toasts(app) if "history.db" in n.message] == ["warning"]


def test_quitting_the_dashboard_on_a_full_disk_says_where_the_rows_went_and_prints_no_traceback(
    tmp_path: Path, mounts: Mounts
) -> None:
    """The real dashboard on a pty: its log file, its history and its registry all on a disk
    that fills up. Quitting used to lose the rows and print logging's own traceback."""
    state = mounts.tmpfs(tmp_path / "state", "4m")
    runtime = tmp_path / "runtime"
    dashboard = Dashboard(clean_env(state, XDG_RUNTIME_DIR=str(runtime), POLYPILOT_DEMO_SPEED="50"))
    try:
        dashboard.wait_for_lock(state)
        until_blocking(
            lambda: (state / "sessions.json").exists() and "Enter sends" in dashboard.text(),
            30,
            "the first session to be saved and its input to be drawn",
        )
        fill(state)
        dashboard.type(b"typed while the disk is full\r")
        until_blocking(
            # The toast wraps where the state folder's path length puts it, and a redraw may put
            # other cells between its lines: its words in order, a little apart, are enough.
            lambda: TOAST_WORDS.search("".join(dashboard.text().split())),
            30,
            "the full-disk toast on screen",
        )
        time.sleep(1.0)
        dashboard.type(b"\x11")  # ctrl+q
        dashboard.proc.wait(30)
    finally:
        dashboard.close()
    screen = bytes(dashboard.screen).decode("utf-8", "replace")
    after = screen[screen.rfind("\x1b[?1049l") :]  # what was printed once the UI left the screen
    assert "Traceback" not in screen and "Logging error" not in screen, after[-3000:]
    assert "could not be saved to" in after and "were kept in" in after and "written back at the next start" in after
    spills = list(runtime.rglob("unsaved-*.json"))
    assert len(spills) == 1 and "typed while the disk is full" in spills[0].read_text()
