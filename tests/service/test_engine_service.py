"""The engine service as a process: its API, its stream, its socket and its lock."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from polypilot_tui.config import Settings
from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.service.remote import RemoteEngine
from polypilot_tui.service.spawn import engine_info, ensure_engine
from polypilot_tui.storage.history import HISTORY_FILE, HistoryDB
from polypilot_tui.storage.registry import Registry, SessionRecord
from tests.support.engine_service import engine_env, kill_engine_of, running_engine, short_state_dir
from tests.support.waiting import until

pytestmark = pytest.mark.slow


def tcp_listeners_of(pid: int) -> list[str]:
    """The TCP sockets ``pid`` listens on (from /proc: no tool needed)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in inodes:  # 0A: LISTEN
                listening.append(parts[1])
    return listening


async def test_the_socket_is_private_there_is_no_tcp_listener_and_a_second_engine_is_refused() -> None:
    async with running_engine() as engine:
        mode = engine.socket.stat().st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        assert stat.S_IMODE(engine.state.stat().st_mode) == 0o700
        assert stat.S_IMODE((engine.state / "polypilot.lock").stat().st_mode) == 0o600
        info = await engine.info()
        assert info["pid"] == engine.process.pid and info["sessions"] == 0
        assert tcp_listeners_of(engine.process.pid) == []
        second = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "polypilot_tui", "serve"],
            env=engine_env(engine.state),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 6
        assert f"an engine already runs for {engine.state} (pid {engine.process.pid}" in second.stderr
        assert (await engine.info())["pid"] == engine.process.pid  # the first one is untouched


async def test_requests_drive_a_session_and_the_stream_mirrors_it_whole() -> None:
    async with running_engine() as engine:
        mirror = RemoteEngine(lambda: asyncio.sleep(0, engine.socket), reconnect=False)
        await mirror.start()
        try:
            sid = await mirror.call(verbs.NEW_SESSION, verbs.NewSession("demo", "one"))
            assert mirror.ids() == [sid] and mirror.view(sid).name == "one"
            assert await mirror.call(verbs.SEND, verbs.Send(sid, "hello there")) == "sent"
            await until(lambda: mirror.view(sid).turns == 1 and not mirror.view(sid).status.busy, 20, "the turn's end")
            history = (await engine.http.get(f"/sessions/{sid}/history"))["items"]
            assert [(i["kind"], i["text"]) for i in history] == [(i.kind.value, i.text) for i in mirror.history(sid)]
            assert mirror.history(sid)[0].text == "hello there"
            assert mirror.streaming_text(sid) == ""
            with pytest.raises(EngineError, match="no session 'nope'"):
                await mirror.call(verbs.SEND, verbs.Send("nope", "x"))
            with pytest.raises(EngineError, match="empty prompt"):
                await mirror.call(verbs.SEND, verbs.Send(sid, "   "))
            await mirror.call(verbs.RENAME, verbs.Rename(sid, "renamed"))
            await until(lambda: mirror.view(sid).name == "renamed", 20, "the new name")
            details = await mirror.call(verbs.DETAILS, verbs.SessionRef(sid))
            assert details.view.id == sid and details.agent_kind == "demo"
            assert await mirror.call(verbs.CLOSE, verbs.SessionRef(sid))
            await until(lambda: mirror.ids() == [], 20, "the session gone")
            await mirror.call(verbs.REOPEN, verbs.Reopen(sid))
            assert mirror.ids() == [sid]
            # Its rows are asked for when shown (a reopened history may be long: not in the event).
            await until(lambda: [i.text for i in mirror.history(sid)][:1] == ["hello there"], 20, "its history")
        finally:
            await mirror.detach(stop_engine=False)


@pytest.mark.expect_errors(
    "timeout graceful shutdown exceeded",
    strict=False,
    reason="server.py: an attached client's record stream does not end when the engine stops; uvicorn "
    "cancels it after SHUTDOWN_GRACE and logs the cancel (reported, issue 23's rewrite of server.py)",
)
async def test_a_stop_asked_for_is_not_undone_by_an_attached_client_until_it_acts(demo_speed: None) -> None:
    async with running_engine() as engine:
        settings = Settings.read(None, state_dir=engine.state)

        async def connect() -> Path:
            return (await ensure_engine(settings))[0]

        mirror = RemoteEngine(connect)
        told: list[str] = []
        mirror.on_notice(lambda notice: told.append(notice.message))
        await mirror.start()
        try:
            stop = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "polypilot_tui", "engine", "stop"],
                env=engine_env(engine.state),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert stop.returncode == 0 and f"Engine pid {engine.process.pid} stopped." in stop.stdout
            await until(lambda: any("The engine was stopped" in m for m in told), 20, "the client told")
            assert await asyncio.to_thread(engine.process.wait, 10) == 0
            assert not engine.socket.exists() and await engine_info(settings) is None  # nobody restarted it
            assert not any("starting a new one" in m for m in told)
            # The user acts (a new session, a send): the engine starts again, with what was saved.
            sid = await mirror.call(verbs.NEW_SESSION, verbs.NewSession("demo", "after the stop"))
            info = await engine_info(settings)
            assert info is not None and info.pid != engine.process.pid
            assert sid in mirror.ids() and any("The engine runs again." in m for m in told)
        finally:
            await mirror.detach(stop_engine=True)
            kill_engine_of(engine.state)


@pytest.fixture
def demo_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine a client starts gets the tests' settings through the environment."""
    monkeypatch.setenv("POLYPILOT_DEMO_SPEED", "20")
    monkeypatch.setenv("POLYPILOT_RECORD", "false")


async def test_an_attached_mirror_gets_a_restored_sessions_saved_rows_whole_and_in_order() -> None:
    """The engine restores without reading chat rows; the mirror's first look at a long saved
    session gets every row (read on the engine a page at a time) and the rows sent after them."""
    state = short_state_dir()
    Registry(state).save([SessionRecord("long", "long", "demo")], 0.0)
    rows = [ChatItem(ItemKind.SYSTEM, f"note {i}", 1.0) for i in range(2500)]
    db = HistoryDB(state / HISTORY_FILE)
    db.write([("long", i, item) for i, item in enumerate(rows)])
    db.close()
    async with running_engine(state) as engine:
        mirror = RemoteEngine(lambda: asyncio.sleep(0, engine.socket), reconnect=False)
        await mirror.start()
        try:
            assert mirror.history("long") == ()  # fetched when first shown, as the dashboard does
            await until(lambda: len(mirror.history("long")) == 2500, 20, "the saved rows")
            assert list(mirror.history("long")) == rows
            assert await mirror.call(verbs.SEND, verbs.Send("long", "and now")) == "sent"
            await until(lambda: mirror.view("long").turns == 1 and not mirror.view("long").status.busy, 20, "the turn")
            assert mirror.history("long")[2500].text == "and now" and list(mirror.history("long")[:2500]) == rows
        finally:
            await mirror.detach(stop_engine=False)


async def test_an_engine_started_from_a_repository_runs_none_of_its_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard starts the engine from the folder it was started in, a repository perhaps:
    one holding a ``pydantic.py`` or a ``polypilot_tui/`` of its own must not be imported."""
    repo = tmp_path / "repo"
    marker = tmp_path / "ran"
    for name in ("polypilot_tui", "httpx"):
        (repo / name).mkdir(parents=True)
        (repo / name / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    (repo / "pydantic.py").write_text(f"open({str(marker)!r}, 'a').write('pydantic')\n")
    monkeypatch.chdir(repo)
    state = short_state_dir()
    settings = Settings.read(None, state_dir=state)
    try:
        path, started = await ensure_engine(settings)
        assert started and path.exists()
        assert await engine_info(settings) is not None
    finally:
        kill_engine_of(state)
        shutil.rmtree(state, ignore_errors=True)
    assert not marker.exists(), marker.read_text()
