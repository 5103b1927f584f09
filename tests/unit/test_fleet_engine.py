"""FleetEngine over in-process engines (no ssh): one list, routing by session, hosts' states.

The ssh side (tunnels, a killed host, refused keys) is tests/e2e/test_fleet.py's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from polypilot_tui.commands.sessions import format_views
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.hosts import HostState
from polypilot_tui.domain.limits import SESSIONS
from polypilot_tui.domain.records import HostChanged, Record
from polypilot_tui.engine import verbs
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.codec import session_state
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.service.fleet import NOTICE_CHARS, NOTICE_KEY_CHARS, FleetEngine, HostDown
from polypilot_tui.service.remote import RemoteEngine
from polypilot_tui.storage.notices import Notice
from tests.support.fleet import FixedMember, fleet_of, started


def engine(tmp_path: Path, prefix: str, clock: FakeClock | None = None) -> LocalEngine:
    ids = itertools.count(1)
    settings = Settings.read(None, state_dir=tmp_path / prefix)
    return build_engine(
        settings, load_agents(None), clock or FakeClock(), persist=False, id_factory=lambda: f"{prefix}{next(ids)}"
    )


async def test_views_list_local_first_then_hosts_in_order_and_calls_go_to_the_sessions_host(tmp_path: Path) -> None:
    local, dev, build = engine(tmp_path, "l"), engine(tmp_path, "d"), engine(tmp_path, "b")
    fleet, members = fleet_of(local, {"dev": dev, "build": build})
    await started(fleet, members)
    try:
        # New sessions on a chosen host go through its member; each lands in the one list.
        on_build = await fleet.member("build").call(verbs.NEW_SESSION, verbs.NewSession("demo"))
        on_dev = await fleet.member("dev").call(verbs.NEW_SESSION, verbs.NewSession("demo"))
        here = await fleet.call(verbs.NEW_SESSION, verbs.NewSession("demo"))  # no session named: Local
        assert [v.id for v in fleet.views()] == [here, on_dev, on_build]
        assert [fleet.host_of(s) for s in (here, on_dev, on_build)] == ["", "dev", "build"]
        assert [(h.label, h.state, h.sessions) for h in fleet.hosts()] == [
            ("Local", HostState.LIVE, 1),
            ("dev", HostState.LIVE, 1),
            ("build", HostState.LIVE, 1),
        ]
        # A verb of a session is asked of its host's engine, not Local's.
        await fleet.call(verbs.RENAME, verbs.Rename(on_dev, "on the dev box"))
        assert dev.view(on_dev).name == "on the dev box" and fleet.view(on_dev).name == "on the dev box"
        with pytest.raises(KeyError):
            fleet.member("nowhere")
    finally:
        await fleet.detach(stop_engine=False)


async def test_a_stale_host_keeps_its_rows_refuses_calls_at_once_and_says_so_by_record(tmp_path: Path) -> None:
    local, dev = engine(tmp_path, "l"), engine(tmp_path, "d")
    fleet, members = fleet_of(local, {"dev": dev})
    changes: list[Record] = []
    fleet.subscribe(changes.append, HostChanged)
    await started(fleet, members)
    try:
        sid = await fleet.member("dev").call(verbs.NEW_SESSION, verbs.NewSession("demo"))
        changes.clear()
        members["dev"].set_state(HostState.STALE, "the ssh connection ended: Connection reset")
        assert changes == [HostChanged("dev")]
        dev_view = fleet.hosts()[1]
        assert dev_view.state is HostState.STALE and "Connection reset" in dev_view.reason
        assert dev_view.last_seen is not None and dev_view.sessions == 1
        assert sid in fleet.ids()  # listed as last seen
        with pytest.raises(HostDown, match="dev is stale: the ssh connection ended"):
            await fleet.call(verbs.SEND, verbs.Send(sid, "hello"))
        members["dev"].set_state(HostState.LIVE)
        assert await fleet.call(verbs.SEND, verbs.Send(sid, "hello")) == "sent"
    finally:
        await fleet.detach(stop_engine=False)


async def test_an_id_two_hosts_hold_is_told_and_listed_once(tmp_path: Path) -> None:
    local, dev = engine(tmp_path, "same"), engine(tmp_path, "same")
    fleet, members = fleet_of(local, {"dev": dev})
    told: list[str] = []
    fleet.on_notice(lambda notice: told.append(notice.message))
    await started(fleet, members)
    try:
        first = await fleet.call(verbs.NEW_SESSION, verbs.NewSession("demo"))
        twin = await fleet.member("dev").call(verbs.NEW_SESSION, verbs.NewSession("demo"))
        assert first == twin == "same1"
        assert [v.id for v in fleet.views()] == ["same1"] and fleet.host_of("same1") == ""
        assert any("same1 is on Local and on dev" in message for message in told)
    finally:
        await fleet.detach(stop_engine=False)


async def test_a_broadcast_is_split_by_host_and_answered_in_the_order_asked(tmp_path: Path) -> None:
    local, dev = engine(tmp_path, "l"), engine(tmp_path, "d")
    fleet, members = fleet_of(local, {"dev": dev})
    await started(fleet, members)
    try:
        a = await fleet.member("dev").call(verbs.NEW_SESSION, verbs.NewSession("demo"))
        b = await fleet.call(verbs.NEW_SESSION, verbs.NewSession("demo"))
        results = await fleet.call(verbs.BROADCAST, verbs.Broadcast((a, b), "hi all"))
        assert [r.session_id for r in results] == [a, b]
        assert dev.view(a).history_len >= 1 and local.view(b).history_len >= 1
    finally:
        await fleet.detach(stop_engine=False)


def test_a_fleet_refuses_a_host_given_twice(tmp_path: Path) -> None:
    local, dev = engine(tmp_path, "l"), engine(tmp_path, "d")
    with pytest.raises(ValueError, match="given twice"):
        FleetEngine(local, [FixedMember("dev", dev), FixedMember("dev", dev)])


async def test_a_single_engine_answers_the_machine_questions_trivially(tmp_path: Path) -> None:
    local = engine(tmp_path, "l")
    assert local.hosts() == () and local.host_of("x") == "" and local.member("") is local
    with pytest.raises(KeyError):
        local.member("dev")


class Stubborn(FixedMember):
    """A host watch that a cancel does not end (asyncio.wait_for in 3.11 can swallow one):
    only its close does."""

    async def run(self, changed: Callable[[], None]) -> None:
        self.closed = asyncio.Event()
        await self.engine.start()
        self.started.set()
        while not self.closed.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                continue  # swallowed

    async def close(self, stop_engine: bool) -> None:
        self.closed.set()
        await super().close(stop_engine)


async def test_quitting_is_bounded_even_when_a_hosts_watch_ignores_its_cancel(tmp_path: Path) -> None:
    local, dev = engine(tmp_path, "l"), engine(tmp_path, "d")
    stubborn = Stubborn("dev", dev)
    fleet = FleetEngine(local, [stubborn])
    await started(fleet, {"dev": stubborn})
    await asyncio.wait_for(fleet.detach(stop_engine=False), 5.0)
    assert stubborn.closed.is_set()


async def test_a_broadcast_to_a_host_down_or_dropping_refuses_its_sessions_and_the_others_take_it(
    tmp_path: Path,
) -> None:
    local, dev, build = engine(tmp_path, "l"), engine(tmp_path, "d"), engine(tmp_path, "b")
    fleet, members = fleet_of(local, {"dev": dev, "build": build})
    await started(fleet, members)
    try:
        on_dev = await fleet.member("dev").call(verbs.NEW_SESSION, verbs.NewSession("demo"))
        on_build = await fleet.member("build").call(verbs.NEW_SESSION, verbs.NewSession("demo"))
        here = await fleet.call(verbs.NEW_SESSION, verbs.NewSession("demo"))
        members["dev"].set_state(HostState.STALE, "the ssh connection ended")

        async def drops(verb: object, request: object) -> object:
            raise ConnectionResetError("the forward ended")

        build.call = drops  # type: ignore[method-assign, assignment]  # its link drops during the call
        results = await fleet.call(verbs.BROADCAST, verbs.Broadcast((on_dev, here, on_build), "hi all"))
        assert [(r.session_id, r.result) for r in results] == [
            (on_dev, "refused"),
            (here, "sent"),
            (on_build, "refused"),
        ]
        assert "dev is stale" in results[0].reason and "nothing was sent" in results[0].reason
        assert "build did not answer" in results[2].reason and "the forward ended" in results[2].reason
        assert local.view(here).history_len >= 1 and dev.view(on_dev).history_len == 0
    finally:
        await fleet.detach(stop_engine=False)


@pytest.mark.parametrize("bad", ["a b", "../etc", "x" * 65, "", "ok\n", "é1"])
async def test_a_remote_engine_leaves_out_a_session_whose_id_is_not_one_and_says_so(tmp_path: Path, bad: str) -> None:
    local = engine(tmp_path, "l")
    good = local.manager.add_session("demo", name="good")
    fine = session_state(local.view(good), (), "")
    odd = session_state(dataclasses.replace(local.view(good), id=bad), (), "")
    remote = RemoteEngine(lambda: asyncio.sleep(0, Path("/nowhere")))
    told: list[str] = []
    remote.on_notice(lambda notice: told.append(notice.message))
    remote.apply_event("snapshot", {"sessions": [odd, fine]})
    remote.apply_event("session", odd)
    assert remote.ids() == [good] and len(told) >= 1 and "is not a session id" in told[0]


async def test_ls_prints_no_terminal_control_an_engine_put_in_a_session_id(tmp_path: Path) -> None:
    # `ls --host`/`--all-hosts` read a host's list straight from its engine (no mirror between).
    local = engine(tmp_path, "l")
    sid = local.manager.add_session("demo", name="evil")
    for bad in ("x\x1b]52;c;aGk=\x07", "\x1b[2J\x1b[H", "a\x9b31m"):
        printed = format_views([dataclasses.replace(local.view(sid), id=bad)], 0.0)
        assert not any(c in printed for c in "\x1b\x07\x9b"), repr(printed)


async def test_a_remote_engine_that_floods_sessions_holds_as_many_as_one_engine_may(tmp_path: Path) -> None:
    local = engine(tmp_path, "l")
    view = local.view(local.manager.add_session("demo", name="one of many"))
    states = [session_state(dataclasses.replace(view, id=f"f{n}"), (), "") for n in range(SESSIONS + 5)]
    remote = RemoteEngine(lambda: asyncio.sleep(0, Path("/nowhere")))
    told: list[str] = []
    remote.on_notice(lambda notice: told.append(notice.message))
    remote.apply_event("snapshot", {"sessions": states})
    assert len(remote.ids()) == SESSIONS and any(f"more than {SESSIONS} sessions" in m for m in told)
    for extra in states[SESSIONS:]:  # one by one, after the snapshot: refused too
        remote.apply_event("session", extra)
    remote.apply_event("session", states[0])  # one it holds is still updated
    assert len(remote.ids()) == SESSIONS and remote.ids()[0] == "f0"
    remote.apply_event("snapshot", {"sessions": states[SESSIONS:]})  # a new list replaces the old whole
    assert remote.ids() == [f"f{n}" for n in range(SESSIONS, SESSIONS + 5)]


async def test_a_hosts_notice_of_megabytes_is_told_cut_with_its_host_named(tmp_path: Path) -> None:
    local, dev = engine(tmp_path, "l"), engine(tmp_path, "d")
    fleet, members = fleet_of(local, {"dev": dev})
    told: list[Notice] = []
    fleet.on_notice(told.append)
    await started(fleet, members)
    try:
        dev.notices.tell("k" * 100_000, "x" * 5_000_000, "warning")
        dev.notices.tell("short", "disk full", "warning")
        mine = [n for n in told if n.message.startswith("dev: ")]
        assert [len(n.message) <= NOTICE_CHARS + 5 and len(n.key) <= NOTICE_KEY_CHARS + 4 for n in mine] == [True, True]
        assert mine[0].message.endswith("…") and mine[1].message == "dev: disk full"
    finally:
        await fleet.detach(stop_engine=False)


async def test_a_host_whose_engine_answers_too_slowly_is_a_failure_to_retry_not_another_version(tmp_path: Path) -> None:
    """A loaded host, or a forward that drops as it opens, must not be told to upgrade."""
    from polypilot_tui.domain.clock import SystemClock
    from polypilot_tui.domain.hosts import HostEntry
    from polypilot_tui.service.fleet import SshMember

    silent = tmp_path / "s.sock"
    accepted: list[asyncio.StreamWriter] = []

    async def hold(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # accepted, never answered

    server = await asyncio.start_unix_server(hold, path=str(silent))
    member = SshMember(HostEntry.checked("slow", "slow"), SystemClock(), connect_timeout=2, ping_timeout=0.2)

    async def connect() -> Path:
        return silent

    member.attach.connect = connect  # type: ignore[method-assign]  # no ssh: the forward's end is the socket
    states: list[HostState] = []
    task = asyncio.create_task(member.run(lambda: states.append(member.health.view.state)))
    try:
        for _ in range(200):
            if member.health.view.reason:
                break
            await asyncio.sleep(0.02)
        assert member.health.view.state is not HostState.OTHER_VERSION, member.health.view
        assert HostState.OTHER_VERSION not in states and "upgrade" not in member.health.view.reason
        assert member.health.view.reason  # the failure is said
    finally:
        task.cancel()
        await member.close(False)
        server.close()
        for writer in accepted:
            writer.close()


async def test_a_host_whose_stream_ends_before_its_snapshot_is_retried_with_backoff_and_says_why(
    tmp_path: Path,
) -> None:
    """An engine that answers who it is and then ends every stream at once must not be
    reconnected to in a tight loop, nor stay "connecting" with no reason."""
    import time

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from polypilot_tui.domain.clock import SystemClock
    from polypilot_tui.domain.hosts import Backoff, HostEntry
    from polypilot_tui.engine.verbs import API_VERSION
    from polypilot_tui.service.fleet import SshMember

    streams: list[float] = []

    async def info(_request: Request) -> Response:
        now = time.time()
        fields = {"pid": 1, "state_dir": "/x", "started_at": now, "now": now, "wall": now, "sessions": 0}
        return JSONResponse({**fields, "running_turns": 0, "persistent": True, "api": API_VERSION})

    async def stream(_request: Request) -> Response:
        streams.append(time.monotonic())
        return Response(b"", media_type="text/event-stream")  # ends before any snapshot

    app = Starlette(routes=[Route("/v1/engine", info), Route("/v1/stream", stream)])
    sock = tmp_path / "e.sock"
    server = uvicorn.Server(uvicorn.Config(app, uds=str(sock), log_level="critical", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    for _ in range(200):
        if sock.exists():
            break
        await asyncio.sleep(0.01)
    member = SshMember(
        HostEntry.checked("early", "early"), SystemClock(), ping_every=0.05, backoff=Backoff(first=1.0, cap=1.0)
    )

    async def connect() -> Path:
        return sock

    member.attach.connect = connect  # type: ignore[method-assign]  # no ssh: the forward's end is the socket
    task = asyncio.create_task(member.run(lambda: None))
    try:
        for _ in range(300):
            if member.health.view.reason:
                break
            await asyncio.sleep(0.01)
        assert member.health.view.reason, member.health.view  # the failure is said
        await asyncio.sleep(1.5)
        assert len(streams) <= 3, f"{len(streams)} streams in ~1.5 s: no backoff"  # 1 s apart at least
    finally:
        task.cancel()
        await member.close(False)
        server.should_exit = True
        await serving
