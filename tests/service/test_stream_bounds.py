"""The engine stays bounded when its clients misbehave: a real ``polypilot serve`` on a real
flooding agent process (tests/support/fake_acp_agent.py, ``CHAOS flood``), clients that
connect and stop reading — raw sockets, a suspended ``polypilot follow``, a suspended
dashboard mirror — measured from /proc (VmRSS) and from what each client gets once it reads
again: a fresh snapshot in place of what it missed, with the reason, and nothing lost."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from bench._support import proc_kib
from polypilot_tui.domain.view import SessionStatus
from polypilot_tui.service.remote import RemoteEngine
from tests.support.engine_service import EngineProcess, engine_env, running_engine
from tests.support.flooding import fake_session, flood_engine, until_idle
from tests.support.mirror_driver import rows_digest
from tests.support.stream_clients import StalledClient, mirror_process
from tests.support.waiting import until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def rss_mib(pid: int) -> float:
    return proc_kib(pid, "status", "VmRSS:") / 1024


async def test_clients_that_stop_reading_leave_the_engine_bounded_and_hear_why_when_they_read(
    tmp_path: Path,
) -> None:
    """A dashboard-like and a follow-like client stop reading while a tool's output is replaced
    up to 1000 times a second (3 KB each, nothing of it kept; 1 MiB may wait for a client
    here): the engine grows by a few MB at most (it grew by 23 MiB in this test, ~3.5 MB/s per
    client, without limit). Once they read, the dashboard's client has the row's last content
    (rows replaced before they went out are sent once), the follower — whose agent events
    cannot be coalesced — a fresh snapshot with the reason in place of what it missed."""
    async with flood_engine(tmp_path, backlog=1 << 20) as engine:
        pid = engine.process.pid
        sid = await fake_session(engine)
        dashboard = StalledClient(engine.socket)
        follower = StalledClient(engine.socket, f"?session={sid}&events=1")
        try:
            await asyncio.sleep(0.5)  # both attached, their snapshots in their buffers
            before = rss_mib(pid)
            await engine.http.post(f"/sessions/{sid}/send", {"prompt": "CHAOS flood 1000 5 progress 3000"})
            peak = before
            while (await engine.http.get(f"/sessions/{sid}"))["status"] != "idle":
                peak = max(peak, rss_mib(pid))
                await asyncio.sleep(0.2)
            assert peak - before < 12, f"the engine grew by {peak - before:.1f} MiB for two clients that stopped"
            events = await follower.read()
            resyncs = [data for kind, data in events if kind == "resync"]
            assert resyncs, [kind for kind, _ in events][-5:]
            assert "the client did not read" in resyncs[0]["reason"]
            assert [s["view"]["id"] for s in resyncs[0]["sessions"]] == [sid]
            rows = [data for kind, data in await dashboard.read() if kind == "change" and data.get("item")]
            history = (await engine.http.get(f"/sessions/{sid}/history"))["items"]
            assert rows[-1]["item"] == history[-1]  # the tool row as it ended, its last output in it
        finally:
            dashboard.close()
            follower.close()


async def test_a_suspended_follow_catches_up_from_the_history_and_prints_the_whole_reply(tmp_path: Path) -> None:
    """``polypilot follow`` stopped with SIGSTOP (ctrl+z) while a reply of 900 KB streams (more
    than may wait for it, 128 KiB here, and its socket holds): resumed, it says it fell behind
    and prints the whole reply, once, in order."""
    async with flood_engine(tmp_path, backlog=128 << 10) as engine:
        sid = await fake_session(engine)
        out = tmp_path / "follow.out"
        with out.open("wb") as sink:
            follow = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "polypilot_tui",
                "follow",
                sid,
                cwd=ROOT,
                env=engine_env(engine.state),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=sink,
                stderr=asyncio.subprocess.PIPE,
            )
        try:
            await until_attached(engine, 1)
            os.kill(follow.pid, signal.SIGSTOP)
            await engine.http.post(f"/sessions/{sid}/send", {"prompt": "CHAOS flood 1000 1 text 900"})
            await until_idle(engine, sid, turns=2)
            os.kill(follow.pid, signal.SIGCONT)
            history = (await engine.http.get(f"/sessions/{sid}/history"))["items"]
            reply = history[-1]["text"]
            assert history[-1]["kind"] == "assistant" and len(reply) == 1000 * 900
            await until_file_ends_with(out, reply[-1100:])  # the last chunk, its number with it
            follow.send_signal(signal.SIGINT)
            assert await asyncio.wait_for(follow.wait(), 30) == 0
        finally:
            if follow.returncode is None:
                follow.kill()
                await follow.wait()
        printed = out.read_text()
        notice = "[fell behind the engine; caught up from its history (turn ends meanwhile not shown)]\n"
        assert printed.count(notice) == 1
        flat = printed.replace(notice, "").replace("\n", "")
        assert flat.count(reply) == 1, "the reply is not printed whole and once"


async def until_attached(engine: EngineProcess, clients: int, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (await engine.info())["attached"] < clients:
        if loop.time() > deadline:
            raise AssertionError(f"{clients} client(s) did not attach within {timeout} s")
        await asyncio.sleep(0.05)


async def until_file_ends_with(path: Path, tail: str, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while tail not in path.read_text()[-len(tail) - 400 :]:
        if loop.time() > deadline:
            raise AssertionError(f"{path.name} did not end with the reply within {timeout} s")
        await asyncio.sleep(0.1)


async def test_a_suspended_dashboard_mirror_is_resynced_and_refetches_every_row(tmp_path: Path) -> None:
    """A dashboard's mirror (a RemoteEngine in a process of its own) suspended while an agent
    adds 400 tool rows of 8 KB as fast as it can (more than may wait for a client: 1 MiB here):
    resumed, it is told it fell behind, and its history of the session is the engine's, row for
    row."""
    async with flood_engine(tmp_path, backlog=1 << 20) as engine:
        sid = await fake_session(engine)
        async with mirror_process(engine.socket) as mirror:
            shown = (await engine.http.get(f"/sessions/{sid}"))["history_len"]
            first = await mirror.ask(f"rows {sid} {shown}")  # shown once: the mirror holds (and follows) its rows
            assert first["rows"] == shown
            os.kill(mirror.process.pid, signal.SIGSTOP)
            try:
                # 400 rows of 8 KB: more than may wait for it, and than its socket holds
                await engine.http.post(f"/sessions/{sid}/send", {"prompt": "CHAOS flood 1000 0.4 tools 8000"})
                view = await until_idle(engine, sid, turns=2)
            finally:
                os.kill(mirror.process.pid, signal.SIGCONT)
            assert view["history_len"] >= shown + 400
            caught_up = await mirror.ask(f"rows {sid} {view['history_len']}")
        history = [item async for _, page in engine.client.history(sid) for item in page]
        assert caught_up["rows"] == len(history) and caught_up["digest"] == rows_digest(row.text for row in history)
        assert any("fell behind the engine" in message for message in caught_up["notices"])


async def test_a_suspended_send_wait_catches_up_and_exits_with_its_turns_outcome(tmp_path: Path) -> None:
    """``polypilot send --wait`` stopped while its turn streams more than may wait for it: resumed
    after the turn ended, it says so on stderr, prints the rest of the reply and exits 0 (the
    turn completed) — the turn's end went by unread, the session's view tells it."""
    async with flood_engine(tmp_path, backlog=128 << 10) as engine:
        sid = await fake_session(engine)
        out = tmp_path / "send.out"
        with out.open("wb") as sink:
            send = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "polypilot_tui",
                "send",
                "--wait",
                sid,
                "CHAOS flood 1000 1 text 900",
                cwd=ROOT,
                env=engine_env(engine.state),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=sink,
                stderr=asyncio.subprocess.PIPE,
            )
        try:
            while not SessionStatus((await engine.http.get(f"/sessions/{sid}"))["status"]).busy:
                await asyncio.sleep(0.02)  # until its turn runs
            os.kill(send.pid, signal.SIGSTOP)
            await until_idle(engine, sid, turns=2)
            os.kill(send.pid, signal.SIGCONT)
            _, err = await asyncio.wait_for(send.communicate(), 60)
            assert send.returncode == 0, err
        finally:
            if send.returncode is None:
                send.kill()
                await send.wait()
        reply = (await engine.http.get(f"/sessions/{sid}/history"))["items"][-1]["text"]
        assert "polypilot send: fell behind the engine; caught up from its history" in err.decode()
        assert out.read_text() == reply + "\n"


@pytest.mark.expect_errors(r"The engine has said nothing for .* reconnecting")
async def test_an_idle_stream_hears_the_keepalive_and_a_silent_engine_is_noticed(tmp_path: Path) -> None:
    """With a keepalive of 0.5 s an idle stream carries a comment every 0.5 s, so a dashboard that
    gives up after 1.5 s of silence stays attached to an idle engine; a stopped engine (SIGSTOP:
    its socket still accepts) is noticed within that, said, and the dashboard attaches again
    when it comes back."""
    async with running_engine(env={"POLYPILOT_STREAM_KEEPALIVE_SECONDS": "0.5"}) as engine:
        raw = StalledClient(engine.socket)
        try:
            started = asyncio.get_running_loop().time()
            events = await raw.read(quiet=5.0, limit=10.0, until=(":", 3))
            took = asyncio.get_running_loop().time() - started
        finally:
            raw.close()
        assert [kind for kind, _ in events] == ["snapshot", ":", ":", ":"]
        assert 1.0 <= took < 5.0  # one every 0.5 s: neither spammed nor late
        mirror = RemoteEngine(lambda: asyncio.sleep(0, engine.socket), silence=1.5)
        told: list[str] = []
        mirror.on_notice(lambda notice: told.append(notice.message))
        await mirror.start()
        try:
            await asyncio.sleep(3.0)  # idle for twice the silence it allows
            assert told == []
            os.kill(engine.process.pid, signal.SIGSTOP)
            try:
                stopped = asyncio.get_running_loop().time()
                await until(lambda: any("said nothing for 1.5 s" in m for m in told), 10, "the silence noticed")
                assert asyncio.get_running_loop().time() - stopped < 5
            finally:
                os.kill(engine.process.pid, signal.SIGCONT)
            await until(lambda: any("Attached to the engine again" in m for m in told), 20, "attached again")
        finally:
            await mirror.detach(stop_engine=False)
