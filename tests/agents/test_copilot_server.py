"""The shared Copilot CLI's bookkeeping without a CLI: the pool, the count, who is told what.

The process is a real ``sleep`` (so kills are real); the SDK client is a stand-in that
records how it was stopped. The real CLI is driven in tests/e2e/test_copilot_shared.py.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.agents.copilot.busy import BusyFlag
from polypilot_tui.agents.copilot.cli_spec import ServerSpec
from polypilot_tui.agents.copilot.intake import EventIntake
from polypilot_tui.agents.copilot.server import CopilotServer, HeadStart, join, live_servers
from polypilot_tui.domain.events import AgentEvent

SPEC = ServerSpec(("copilot",), (("COPILOT_HOME", "/h"), ("KEY", "sk-secret")), logged_in=False)


class Member:
    """A session on the server: remembers what it was told."""

    def __init__(self) -> None:
        self.lost: list[str] = []
        self.raw: list[tuple[str, dict[str, Any]]] = []

    def on_raw_event(self, session_id: str, raw: dict[str, Any]) -> None:
        self.raw.append((session_id, raw))

    def mark_lost(self, reason: str) -> None:
        self.lost.append(reason)


class FakeClient:
    def __init__(self) -> None:
        self.stopped: list[str] = []
        self.pings = 0

    async def stop(self) -> None:
        self.stopped.append("stop")

    async def force_stop(self) -> None:
        self.stopped.append("force")

    async def ping(self) -> None:
        self.pings += 1


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "30"])
    yield proc
    proc.kill()
    proc.wait()


async def started(server: CopilotServer, proc: subprocess.Popen[bytes], client: FakeClient | None = None) -> FakeClient:
    """Start ``server`` through ``ready()`` with a launch that puts ``client`` on ``proc``."""
    client = client or FakeClient()

    async def launch(_: object) -> None:
        server.client, server.proc = client, proc

    server.boot = lambda: None  # type: ignore[assignment,method-assign,return-value]
    server.launch = launch  # type: ignore[method-assign]
    await server.ready()
    return client


async def test_one_spec_one_server_and_another_spec_another() -> None:
    a, b, c = Member(), Member(), Member()
    first = join(SPEC, a)
    assert join(SPEC, b) is first and first.members == {a, b}
    other = join(ServerSpec(("copilot",), (("COPILOT_HOME", "/other"),), logged_in=False), c)
    assert other is not first and set(live_servers()) == {first, other}
    for server, member in ((first, a), (first, b), (other, c)):
        await server.leave(member)
    assert live_servers() == []


async def test_the_last_session_out_stops_the_cli(sleeper: subprocess.Popen[bytes]) -> None:
    a, b = Member(), Member()
    server = join(SPEC, a)
    join(SPEC, b)
    client = await started(server, sleeper)
    await server.leave(a)
    assert client.stopped == [] and server.alive and live_servers() == [server]
    await server.leave(b)
    assert client.stopped == ["stop"] and live_servers() == []
    assert join(SPEC, Member()) is not server, "a stopped server takes no one: the next session starts a new one"


async def test_a_crash_tells_every_session_once_and_the_pool_forgets(sleeper: subprocess.Popen[bytes]) -> None:
    a, b = Member(), Member()
    server = join(SPEC, a)
    join(SPEC, b)
    await started(server, sleeper)
    server.lost("Copilot CLI exited (code -9)")
    server.lost("Copilot CLI connection closed")  # the close hook fires too: nobody hears it twice
    assert a.lost == b.lost == ["Copilot CLI exited (code -9)"]
    assert not server.alive and live_servers() == []
    assert sleeper.wait(5) is not None
    fresh = join(SPEC, a)
    assert fresh is not server


async def test_a_kill_tells_the_others_not_the_killer(sleeper: subprocess.Popen[bytes]) -> None:
    a, b, c = Member(), Member(), Member()
    server = join(SPEC, a)
    join(SPEC, b)
    join(SPEC, c)
    client = await started(server, sleeper)
    server.kill(a)
    assert a.lost == [] and len(b.lost) == len(c.lost) == 1 and "another session's turn" in b.lost[0]
    assert sleeper.wait(5) == -9
    for member in (a, b, c):
        await server.leave(member)
    assert client.stopped == ["force"], "a dead CLI is not stopped gracefully"


class HangingClient(FakeClient):
    async def force_stop(self) -> None:
        await asyncio.Event().wait()  # a CLI that does not answer the stop


async def test_leaving_while_it_starts_kills_it_even_if_the_leave_is_cancelled(
    sleeper: subprocess.Popen[bytes],
) -> None:
    member = Member()
    server = join(SPEC, member)

    async def launch(_: object) -> None:
        server.client, server.proc = HangingClient(), sleeper  # spawned; the SDK's handshake still runs
        await asyncio.Event().wait()

    server.boot = lambda: None  # type: ignore[assignment,method-assign,return-value]
    server.launch = launch  # type: ignore[method-assign]
    starting = asyncio.get_running_loop().create_task(server.ready())
    await asyncio.sleep(0)  # the start task is created...
    await asyncio.sleep(0)  # ...and runs up to the handshake
    leaving = asyncio.get_running_loop().create_task(server.leave(member))
    await asyncio.sleep(0)  # the leave runs up to the stop that never answers...
    leaving.cancel()  # ...and is cancelled there (a second Stop): the CLI must be gone anyway
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert sleeper.wait(5) == -9
    with pytest.raises(asyncio.CancelledError):
        await starting  # the start was cancelled with the last one out
    assert live_servers() == []


class HangingStopClient(FakeClient):
    async def stop(self) -> None:
        await asyncio.Event().wait()  # a graceful stop that is still running when a second Stop comes


async def test_a_cancelled_graceful_stop_still_kills_the_cli(sleeper: subprocess.Popen[bytes]) -> None:
    member = Member()
    server = join(SPEC, member)
    client = await started(server, sleeper, HangingStopClient())
    leaving = asyncio.get_running_loop().create_task(server.leave(member))
    await asyncio.sleep(0)  # the last one out stops it gracefully...
    leaving.cancel()  # ...and a second Stop (or finish_background) cancels that stop
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert sleeper.wait(5) == -9, "a CLI that left the pool must not outlive a cancelled stop"
    assert client.stopped == [] and live_servers() == []


async def test_raw_events_reach_only_their_own_session() -> None:
    seen: dict[str, list[AgentEvent]] = {"a": [], "b": []}
    intakes = {name: EventIntake(seen[name].append, BusyFlag()) for name in seen}
    unattached_seen: list[AgentEvent] = []
    unattached = EventIntake(unattached_seen.append, BusyFlag())
    intakes["a"].attach("sid-a")
    intakes["b"].attach("sid-b")
    server = join(SPEC, intakes["a"])
    for member in (intakes["b"], unattached):
        join(SPEC, member)
    raw = {"type": "tool.execution_complete", "data": {"toolCallId": "t", "success": True}}
    server.on_raw_event("sid-b", raw)  # what the JSON-RPC hook calls
    assert seen["a"] == [] and unattached_seen == [] and [e.type for e in seen["b"]] == ["tool.execution_complete"]
    for member in (intakes["a"], intakes["b"], unattached):
        await server.leave(member)


class SilentClient(FakeClient):
    async def ping(self) -> None:
        await asyncio.Event().wait()  # a CLI that answers nothing


async def test_one_slow_connect_does_not_kill_a_cli_that_still_answers(sleeper: subprocess.Popen[bytes]) -> None:
    slow, other = Member(), Member()
    server = join(SPEC, slow)
    join(SPEC, other)
    client = await started(server, sleeper)
    await server.timed_out(slow, "the Copilot CLI did not answer within 60 s")
    assert client.pings == 1 and other.lost == [] and server.alive and live_servers() == [server]
    for member in (slow, other):
        await server.leave(member)


@pytest.mark.parametrize("alone", [True, False])
async def test_a_slow_connect_kills_the_cli_when_alone_or_when_it_answers_nothing(
    sleeper: subprocess.Popen[bytes], alone: bool
) -> None:
    slow, other = Member(), Member()
    server = join(SPEC, slow)
    if not alone:
        join(SPEC, other)
    client = await started(server, sleeper, FakeClient() if alone else SilentClient())
    # A timeout of 0: wait_for gives up on a pending ping at once (no real time passes).
    await server.timed_out(slow, "the Copilot CLI did not answer within 60 s", timeout=0)
    assert sleeper.wait(5) == -9 and live_servers() == [] and slow.lost == []
    assert other.lost == ([] if alone else ["the Copilot CLI did not answer within 60 s"])
    assert client.pings == 0, "a session alone on the CLI does not ask it anything"


async def test_join_does_not_hand_out_a_cli_that_exited_before_its_watcher_said_so(
    sleeper: subprocess.Popen[bytes],
) -> None:
    first = Member()
    server = join(SPEC, first)
    await started(server, sleeper)  # no watcher thread here: its report never comes
    sleeper.kill()
    sleeper.wait()
    fresh = join(SPEC, Member())
    assert fresh is not server and live_servers() == [fresh]
    assert first.lost == ["Copilot CLI exited (killed by SIGKILL (9))"]


async def test_a_failed_spawn_gives_the_server_up(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_cli(*_: object, **__: object) -> subprocess.Popen[bytes]:
        raise FileNotFoundError("no such file: copilot")

    monkeypatch.setattr("polypilot_tui.agents.copilot.server.spawn_cli", no_cli)
    member = Member()
    server = join(SPEC, member)
    with pytest.raises(FileNotFoundError):
        await server.ready()
    assert server.dead and live_servers() == [], "the next connect must not wait on a failed start"
    assert join(SPEC, member) is not server


async def test_no_repr_shows_the_environment(sleeper: subprocess.Popen[bytes]) -> None:
    server = join(SPEC, Member())
    await started(server, sleeper)
    for text in (repr(SPEC), str(SPEC), repr(server), str(server), repr(live_servers())):
        assert "sk-secret" not in text and "COPILOT_HOME" not in text
    assert hash(SPEC) == hash(ServerSpec(SPEC.argv, SPEC.env, logged_in=False)), "the spec is the pool's key"
    other_key = ServerSpec(SPEC.argv, (("COPILOT_HOME", "/h"), ("KEY", "sk-other")), logged_in=False)
    assert join(other_key, Member()) is not server, "another environment, another CLI"


def head_started(proc: subprocess.Popen[bytes], client: FakeClient, monkeypatch: pytest.MonkeyPatch) -> HeadStart:
    """A head start whose boot spawns nothing and whose launch puts ``client`` on ``proc``."""

    async def launch(self: CopilotServer, _: object) -> None:
        self.client, self.proc = client, proc

    monkeypatch.setattr(CopilotServer, "boot", lambda self: None)
    monkeypatch.setattr(CopilotServer, "launch", launch)
    return HeadStart(SPEC)


async def test_the_session_takes_over_the_head_start_and_is_then_alone_on_it(
    sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = FakeClient()
    held = head_started(sleeper, client, monkeypatch)
    session = Member()
    server = join(SPEC, session)
    assert server is held.server and server.members == {session}, "one CLI: the one started ahead"
    await server.ready()
    await held.release()  # the session holds it now: nothing stops
    assert server.alive and client.stopped == []
    await server.timed_out(session, "create did not answer")  # alone on it, as if it had started it
    assert client.pings == 0 and sleeper.wait(5) == -9


async def test_a_head_start_no_session_took_is_stopped_on_release(
    sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = FakeClient()
    held = head_started(sleeper, client, monkeypatch)
    await held.server.ready()
    other = join(ServerSpec(("copilot", "--other"), SPEC.env, logged_in=False), Member())  # another spec
    assert other is not held.server
    await held.release()
    assert client.stopped == ["stop"] and live_servers() == [other]
    await other.leave(next(iter(other.members)))


async def test_a_head_start_handed_its_cli_boots_no_other_and_a_late_one_is_killed(
    sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's early CLI (agents/head_start.py) is the server's process: no second spawn. One
    handed to a server already started is not needed and is killed and reaped at once."""
    from polypilot_tui.agents.copilot import server as server_module

    def no_spawn(*_: object, **__: object) -> subprocess.Popen[bytes]:
        raise AssertionError("spawned a second CLI")

    async def launch(self: CopilotServer, imported: object) -> None:
        self.client = FakeClient()

    monkeypatch.setattr(server_module, "spawn_cli", no_spawn)
    monkeypatch.setattr(server_module, "install_sdk_import", lambda: None)
    monkeypatch.setattr(server_module, "import_sdk", lambda: None)
    monkeypatch.setattr(CopilotServer, "launch", launch)
    held = HeadStart(SPEC, sleeper)
    await held.server.ready()
    assert held.server.proc is sleeper and held.server.alive
    late = subprocess.Popen(["sleep", "30"])
    try:
        second = HeadStart(SPEC, late)
        assert second.server is held.server
        assert late.returncode == -9 and sleeper.poll() is None
    finally:
        late.kill()
        late.wait()
    await second.release()
    await held.release()
    assert live_servers() == [] and sleeper.wait(5) == -9  # the last one out stopped the CLI


async def test_a_sandboxed_session_never_shares_a_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sessions of one agent in one folder have the same sandbox argv where no cgroup can be
    made (a user's, not root's) and no network rule opens a gate of its own: each still gets a
    CLI of its own, and no sandboxed session joins an unsandboxed one's."""
    from polypilot_tui.agents import sandbox
    from polypilot_tui.agents.copilot.cli_spec import spec_of
    from polypilot_tui.config import AgentConfig, Settings
    from polypilot_tui.domain.sandbox import Sandbox, SandboxMode

    on = Sandbox(SandboxMode.WORKSPACE)
    if sandbox.sandbox_problem(on) is not None:
        pytest.skip(f"no sandbox here: {sandbox.sandbox_problem(on)}")
    monkeypatch.setattr(sandbox, "pids_cgroup_base", lambda: None)  # as for a user: no cgroup in the argv
    agent = AgentConfig(name="copilot", kind="copilot")
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    (tmp_path / "work").mkdir()
    plan = sandbox.plan_for(on, tmp_path / "work", agent, settings)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    one, two = (spec_of(agent, "/bin/true", env, logged_in=False, sandbox=plan) for _ in range(2))
    assert one.argv == two.argv  # the sandbox alone does not set them apart
    bare = spec_of(agent, "/bin/true", env, logged_in=False)
    members = [Member() for _ in range(4)]
    servers = [join(spec, member) for spec, member in zip((one, two, bare, bare), members, strict=True)]
    assert len({id(server) for server in servers}) == 3 and servers[2] is servers[3]
    for server, member in zip(servers, members, strict=True):
        await server.leave(member)
    assert live_servers() == []
