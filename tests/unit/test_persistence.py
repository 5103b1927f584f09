"""Sessions survive a restart (persistence.py + status.py) on the demo agent, in real time."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from polypilot_tui.agents import create_backend
from polypilot_tui.agents.base import AgentBackend, EventSink
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import Clock, FakeClock, SystemClock
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import Persistence
from polypilot_tui.storage.history import HISTORY_FILE, HistoryDB
from polypilot_tui.storage.lock import LockHolder, lock_holder
from polypilot_tui.storage.registry import REGISTRY_FILE, Registry, SessionRecord
from tests.support.waiting import until

POLYPILOT = Path(sys.executable).with_name("polypilot")


class App:
    """A manager + persistence on a state dir, counting the agents it starts."""

    def __init__(self, state: Path, delay: float = 0.05, clock: Clock | None = None, **settings: Any) -> None:
        options = {"demo_speed": 20.0, **settings}
        self.settings = Settings.read(None, state_dir=state, **options)
        self.catalog = load_agents(None)
        self.started: list[str] = []
        clock = clock or SystemClock()

        def factory(agent: str, sink: EventSink, workdir: Path) -> AgentBackend:
            self.started.append(agent)
            return create_backend(self.catalog.get(agent), sink, clock, self.settings, workdir)

        self.manager = SessionManager(self.settings, self.catalog, clock, backend_factory=factory)
        self.persistence = Persistence(self.manager, self.settings, registry_delay=0.5, history_delay=delay)
        self.persistence.start()

    async def close(self) -> None:
        await self.manager.shutdown()
        await self.persistence.close()


def registry(state: Path) -> dict[str, Any]:
    try:
        return json.loads((state / REGISTRY_FILE).read_text())  # atomic: never half a file
    except FileNotFoundError:
        return {"sessions": []}


def entry(state: Path, sid: str) -> dict[str, Any] | None:
    return next((s for s in registry(state)["sessions"] if s["id"] == sid), None)


def db_rows(state: Path, sid: str) -> list[tuple[int, str, str]] | None:
    """What another process reads from history.db (None while it is unreadable)."""
    try:
        conn = sqlite3.connect(f"file:{state / HISTORY_FILE}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        return conn.execute("SELECT idx, kind, text FROM items WHERE session_id=? ORDER BY idx", (sid,)).fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def texts(app: App, sid: str) -> list[tuple[int, str, str]]:
    return [(i, it.kind.value, it.text) for i, it in enumerate(app.manager.history(sid))]


# ---- registry --------------------------------------------------------------------------
async def test_a_new_session_is_on_disk_within_half_a_second(tmp_path: Path) -> None:
    app = App(tmp_path)
    sid = await app.manager.create_session("demo", "first")
    start = time.monotonic()
    await until(lambda: entry(tmp_path, sid) is not None, 5.0)
    took = time.monotonic() - start
    assert took < 2.5  # the 0.5 s debounce plus a loaded machine's scheduling and fsync: never only at exit
    saved = entry(tmp_path, sid)
    assert saved and saved["name"] == "first" and saved["agent"] == "demo" and saved["agent_session_id"]
    assert lock_holder(tmp_path) == LockHolder(os.getpid(), socket.gethostname(), ANY)  # the one writer
    assert stat.S_IMODE((tmp_path / REGISTRY_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o700
    await app.close()
    assert lock_holder(tmp_path) is None  # a clean exit lets go of the folder


async def test_registry_writes_are_debounced(tmp_path: Path) -> None:
    clock = FakeClock()  # the debounce runs on the engine's clock: virtual time, the same on any machine
    app = App(tmp_path, clock=clock)
    sid = await app.manager.create_session("demo")
    await app.manager.send(sid, "!hang")  # turn_start, then silence
    await app.persistence.flush()
    assert (entry(tmp_path, sid) or {}).get("status") == "thinking"
    writes = app.persistence.store.registry.writes
    for i in range(500):  # 500 deltas over 1.2 virtual seconds: a write starts only 0.5 s after it is armed
        app.manager.apply(sid, AgentEvent("assistant.message_delta", {"deltaContent": f"w{i} "}))
        await clock.advance(1.2 / 500)
    await app.persistence.flush()  # and one more, now
    assert app.persistence.store.registry.writes - writes <= 3
    saved = entry(tmp_path, sid)
    assert saved and saved["status"] == "writing" and saved["last_prompt"] == "!hang"
    await app.manager.stop(sid)
    await app.persistence.flush()
    assert (entry(tmp_path, sid) or {})["last_prompt"] == ""  # only while a turn is in flight
    await app.close()


# ---- history ---------------------------------------------------------------------------
async def test_history_is_written_through_and_tool_rows_replaced(tmp_path: Path) -> None:
    app = App(tmp_path)
    sid = await app.manager.create_session("demo")
    await app.manager.send(sid, "look at the project and run the tests")
    await until(lambda: app.manager.session(sid).turns, 10)
    await until(lambda: db_rows(tmp_path, sid) == texts(app, sid), 2.0)  # before any close
    tool = next(it for it in app.manager.history(sid) if it.kind is ItemKind.TOOL)
    assert tool.tool_status == "completed"
    await app.close()


async def test_restart_restores_lazily_with_history_and_agent_id(tmp_path: Path) -> None:
    app = App(tmp_path)
    sid = await app.manager.create_session("demo", "keep me")
    await app.manager.send(sid, "hi there")
    await until(lambda: app.manager.session(sid).turns, 10)
    before, agent_id = texts(app, sid), app.manager.session(sid).agent_session_id
    await app.close()

    again = App(tmp_path)
    assert again.persistence.restored.ids == [sid] and again.persistence.restored.mid_turn == []
    assert texts(again, sid) == before
    session = again.manager.session(sid)
    assert session.agent_session_id == agent_id and session.name == "keep me"
    assert session.last_activity_at is not None and session.turn is None
    await asyncio.sleep(0.2)
    assert again.started == []  # lazy: no agent until the first send
    await again.manager.send(sid, "and again")
    await until(lambda: len(session.turns) == 1, 10)
    assert again.started == ["demo"]
    await until(lambda: db_rows(tmp_path, sid) == texts(again, sid), 2.0)
    await again.close()


async def test_quit_mid_turn_restores_the_draft_and_offers_a_resend(tmp_path: Path) -> None:
    app = App(tmp_path, demo_speed=1.0)
    sid = await app.manager.create_session("demo")
    await app.manager.send(sid, "!slow")
    await until(lambda: app.manager.streaming_text(sid).count("word") >= 3, 10)
    await app.close()  # shutdown keeps the turn on record: a resume is due

    again = App(tmp_path)
    assert again.persistence.restored.mid_turn == [sid]
    await until(lambda: again.started == ["demo"], 2.0)  # mid-turn: reconnects at once
    session = again.manager.session(sid)
    draft = session.history[1]
    assert draft.kind is ItemKind.ASSISTANT and draft.interrupted and draft.text.startswith("word0 word1 word2")
    await until(lambda: session.turn is None, 35)  # the demo reports the lost turn at once
    assert session.interrupted_prompt == "!slow"
    assert await again.manager.resend_interrupted(sid)
    await until(lambda: session.turns and session.turns[-1].outcome.value == "completed", 10)
    await until(lambda: db_rows(tmp_path, sid) == texts(again, sid), 2.0)
    conn = sqlite3.connect(tmp_path / HISTORY_FILE)
    assert conn.execute("SELECT COUNT(*) FROM drafts").fetchone() == (0,)
    conn.close()
    await again.close()


async def test_queued_prompts_survive_a_quit_and_wait_for_the_user(tmp_path: Path) -> None:
    app = App(tmp_path, demo_speed=1.0)
    sid = await app.manager.create_session("demo")
    await app.manager.send(sid, "!slow")
    await until(lambda: app.manager.streaming_text(sid), 10)
    await app.manager.send(sid, "queued first")
    await app.manager.send(sid, "queued second")
    assert [p.text for p in app.manager.session(sid).queue] == ["queued first", "queued second"]
    await app.manager.quit()
    await app.close()
    saved = json.loads((tmp_path / REGISTRY_FILE).read_text())["sessions"][0]
    assert saved["queue"] == ["queued first", "queued second"]

    again = App(tmp_path)
    view = again.manager.view(sid)
    assert [p.text for p in again.manager.session(sid).queue] == ["queued first", "queued second"]
    assert view.queued == 2 and view.queue_held  # nothing goes out by itself
    assert view.turns == 1  # the interrupted one: the count goes on across restarts
    assert await again.manager.send_queued(sid)
    session = again.manager.session(sid)
    await until(
        lambda: (
            [t.prompt for t in session.turns if t.outcome.value == "completed"] == ["queued first", "queued second"]
        ),
        30,
    )  # released: the rest follows in order
    assert again.manager.view(sid).queue == ()
    await again.close()


async def test_closing_a_session_forgets_it(tmp_path: Path) -> None:
    app = App(tmp_path)
    keep = await app.manager.create_session("demo", "keep")
    drop = await app.manager.create_session("demo", "drop")
    await app.manager.send(drop, "hello you")
    await until(lambda: app.manager.session(drop).turns, 10)
    await until(lambda: db_rows(tmp_path, drop) and entry(tmp_path, drop) and entry(tmp_path, keep), 2.0)
    await app.manager.close(drop)
    await until(lambda: entry(tmp_path, drop) is None and db_rows(tmp_path, drop) == [], 2.0)
    assert entry(tmp_path, keep) is not None
    await app.close()


# ---- a broken database never blocks a session ------------------------------------------
def save_registry(state: Path, *records: SessionRecord) -> None:
    state.mkdir(parents=True, exist_ok=True)
    Registry(state).save(records, time.time())


@pytest.mark.expect_errors("history.db was unusable")
async def test_corrupt_database_at_start(tmp_path: Path) -> None:
    save_registry(tmp_path, SessionRecord("a", "alpha", "demo"), SessionRecord("b", "beta", "demo"))
    (tmp_path / HISTORY_FILE).write_bytes(b"garbage" * 500)
    app = App(tmp_path)
    assert app.persistence.restored.ids == ["a", "b"]
    assert list(tmp_path.glob(f"{HISTORY_FILE}.corrupt-*"))
    await app.manager.send("a", "hello again")
    await until(lambda: app.manager.session("a").turns, 10)
    await until(lambda: db_rows(tmp_path, "a") == texts(app, "a"), 2.0)
    assert [r["id"] for r in registry(tmp_path)["sessions"]] == ["a", "b"]
    await app.close()


@pytest.mark.expect_errors("history.db was unusable")
async def test_database_corrupted_while_running_is_rewritten_from_memory(tmp_path: Path) -> None:
    app = App(tmp_path)
    sid = await app.manager.create_session("demo")
    await app.manager.send(sid, "first question")
    await until(lambda: app.manager.session(sid).turns, 10)
    await until(lambda: db_rows(tmp_path, sid) == texts(app, sid), 2.0)
    loop = asyncio.get_running_loop()
    # On the store's own thread (sqlite connections are thread-bound): a test-only reach.
    await loop.run_in_executor(app.persistence._io, app.persistence.store.history.close)  # noqa: SLF001
    for suffix in ("-wal", "-shm"):
        Path(f"{tmp_path / HISTORY_FILE}{suffix}").unlink(missing_ok=True)
    (tmp_path / HISTORY_FILE).write_bytes(b"\0broken" * 1000)
    await app.manager.send(sid, "second question")
    await until(lambda: len(app.manager.session(sid).turns) == 2, 10)
    # Written now, then read once: a reader polling while the new file is made would hold the
    # lock its switch to WAL needs, and the writer (which never waits on a lock) would say so.
    await app.persistence.flush()
    assert db_rows(tmp_path, sid) == texts(app, sid)  # all of it, not just the new rows
    await app.close()


@pytest.mark.expect_errors("history cannot be saved .*: database is locked")
async def test_locked_database_blocks_nothing_and_loses_nothing(tmp_path: Path) -> None:
    app = App(tmp_path)
    sid = await app.manager.create_session("demo")
    await until(lambda: (tmp_path / HISTORY_FILE).exists())
    other = sqlite3.connect(tmp_path / HISTORY_FILE, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        await app.manager.send(sid, "while locked")
        await until(lambda: app.manager.session(sid).turns, 10)
        late = await app.manager.create_session("demo", "late")
        await until(lambda: entry(tmp_path, late) is not None, 2.0)  # the registry does not wait
        start = time.monotonic()
        await asyncio.sleep(0.01)
        assert time.monotonic() - start < 1.0  # the loop is not held by a lock
        assert db_rows(tmp_path, sid) == []
    finally:
        other.execute("ROLLBACK")
        other.close()
    await until(lambda: db_rows(tmp_path, sid) == texts(app, sid), 8.0)  # retried with backoff
    await app.close()


@pytest.mark.expect_errors("history cannot be saved .*: database is locked")
async def test_database_locked_at_start_keeps_old_rows_and_appends_new(tmp_path: Path) -> None:
    app = App(tmp_path)
    sid = await app.manager.create_session("demo")
    await app.manager.send(sid, "before the lock")
    await until(lambda: app.manager.session(sid).turns, 10)
    before = texts(app, sid)
    await app.close()

    other = sqlite3.connect(tmp_path / HISTORY_FILE, isolation_level=None)
    other.execute("PRAGMA locking_mode=EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")
    other.execute("COMMIT")
    try:
        locked = App(tmp_path)
        assert locked.persistence.restored.ids == [sid]
        assert sid in locked.persistence.restored.unloaded
        assert locked.manager.history(sid) == ()  # shown empty, kept on disk
        await locked.manager.send(sid, "during the lock")
        await until(lambda: locked.manager.session(sid).turns, 10)
        during = [text for _, _, text in texts(locked, sid)]
    finally:
        other.close()
    await locked.close()  # flushes at offset len(before)

    again = App(tmp_path)
    restored = [text for _, _, text in texts(again, sid)]
    assert restored == [text for _, _, text in before] + during
    await again.close()


# ---- polypilot status ------------------------------------------------------------------
def status_json(state: Path) -> dict[str, Any]:
    env = {**os.environ, "POLYPILOT_STATE_DIR": str(state)}
    out = subprocess.run([str(POLYPILOT), "status", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


async def test_status_json_matches_the_live_sidebar_model(tmp_path: Path) -> None:
    app = App(tmp_path)
    idle = await app.manager.create_session("demo", "idle one")
    busy = await app.manager.create_session("demo", "busy one")
    await app.manager.send(busy, "!hang")
    await until(lambda: (entry(tmp_path, busy) or {}).get("status") == "thinking", 3.0)
    doc = await asyncio.to_thread(status_json, tmp_path)
    assert doc["app_running"] is True
    rows = {s["id"]: s for s in doc["sessions"]}
    for sid in (idle, busy):
        view = app.manager.view(sid)
        row = rows[sid]
        assert (row["status"], row["reason"], row["name"], row["agent"]) == (
            view.status.value,
            view.reason,
            view.name,
            view.agent,
        )
    assert rows[busy]["busy"] and rows[busy]["turn_in_flight"] and not rows[idle]["busy"]
    await app.close()


def test_status_json_when_the_app_is_gone(tmp_path: Path) -> None:
    secret = "ghp_" + "z" * 36
    save_registry(
        tmp_path,
        SessionRecord("a", "alpha", "demo", status="idle"),
        SessionRecord(
            "b", "beta", "copilot", status="thinking", turn_in_flight=True, last_prompt=f"use GITHUB_TOKEN={secret}"
        ),
        SessionRecord("c", "gamma", "demo", status="error", reason=f"auth failed for token {secret}"),
        SessionRecord("d", "delta", "demo", status="idle", interrupted_prompt="redo it"),
    )
    doc = status_json(tmp_path)
    assert doc["app_running"] is False
    statuses = {s["id"]: (s["status"], s["interrupted"]) for s in doc["sessions"]}
    assert statuses == {"a": ("idle", False), "b": ("disconnected", True), "c": ("error", False), "d": ("idle", True)}
    text = json.dumps(doc)
    assert secret not in text and "last_prompt" not in text and "redo it" not in text


def test_status_text_and_empty_state(tmp_path: Path) -> None:
    env = {**os.environ, "POLYPILOT_STATE_DIR": str(tmp_path / "none")}
    out = subprocess.run([str(POLYPILOT), "status"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "0 session(s)" in out.stdout
    save_registry(
        tmp_path,
        SessionRecord(
            "a", "alpha", "demo", status="stuck", reason="no events for 121 s", last_activity_at=time.time() - 3700
        ),
    )
    env["POLYPILOT_STATE_DIR"] = str(tmp_path)
    out = subprocess.run([str(POLYPILOT), "status"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert "alpha" in out.stdout and "stuck" in out.stdout and "1h ago" in out.stdout
    assert not (tmp_path / "none").exists()  # status never creates anything


@pytest.mark.expect_errors(r"history write failed\nTypeError: a bug in the writer")
async def test_a_bug_in_the_history_writer_is_logged_in_full_and_saving_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write = HistoryDB.write
    calls: list[int] = []

    def buggy_once(self: HistoryDB, rows: Any, *args: Any, **kwargs: Any) -> Any:
        if rows and not calls:  # the first write of rows (a claim at start writes none)
            calls.append(1)
            raise TypeError("a bug in the writer")
        return write(self, rows, *args, **kwargs)

    monkeypatch.setattr(HistoryDB, "write", buggy_once)
    app = App(tmp_path)
    sid = await app.manager.create_session("demo")
    await app.manager.send(sid, "first")
    await until(lambda: app.manager.session(sid).turns, 10)
    await app.persistence.flush()  # the first turn's rows meet the bug, alone in their write
    await app.manager.send(sid, "second")  # saving goes on after the bug
    await until(lambda: len(app.manager.session(sid).turns) == 2, 10)
    await app.persistence.flush()
    assert "second" in [text for _, _, text in db_rows(tmp_path, sid) or []]
    await app.close()


@pytest.mark.expect_errors(
    "cannot read .*sessions.json: .* not a regular file",
    r"history.db was unusable \(it is a folder",
    "recording failed",
    "session list cannot be saved",
    "could not be saved .*they were kept in",
)
async def test_unwritable_files_never_stop_a_session(tmp_path: Path) -> None:
    for name in (REGISTRY_FILE, HISTORY_FILE):  # directories where files should be
        (tmp_path / name).mkdir()
    (tmp_path / "recordings").write_text("a file where the directory should be")
    app = App(tmp_path)
    sid = await app.manager.create_session("demo")
    await app.manager.send(sid, "hello anyway")
    await until(lambda: app.manager.session(sid).turns, 10)
    assert app.manager.session(sid).turns[0].outcome.value == "completed"
    await asyncio.sleep(0.7)  # a failed registry write is retried, not raised
    await asyncio.wait_for(app.close(), 10)
