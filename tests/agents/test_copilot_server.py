"""The shared Copilot CLI's bookkeeping without a CLI: the pool, the count, who is told what.

The process is a real ``sleep`` (so kills are real); the SDK client is a stand-in that
records how it was stopped. The real CLI is driven in tests/e2e/test_copilot_shared.py.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from polypilot_tui.agents.copilot.busy import BusyFlag
from polypilot_tui.agents.copilot.intake import EventIntake
from polypilot_tui.agents.copilot.server import CopilotServer, ServerSpec, join, live_servers
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

    async def stop(self) -> None:
        self.stopped.append("stop")

    async def force_stop(self) -> None:
        self.stopped.append("force")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "30"])
    yield proc
    proc.kill()
    proc.wait()


async def started(server: CopilotServer, proc: subprocess.Popen[bytes]) -> FakeClient:
    """Make ``server`` look started on ``proc`` (what ``ready()`` leaves behind)."""

    async def nothing() -> None:
        return None

    client = FakeClient()
    server.client, server.proc = client, proc
    server._starting = asyncio.get_running_loop().create_task(nothing())  # noqa: SLF001 - a started server
    await server._starting  # noqa: SLF001
    return client


async def test_one_spec_one_server_and_another_spec_another() -> None:
    a, b, c = Member(), Member(), Member()
    first = join(SPEC, a)
    assert join(SPEC, b) is first and first.members == {a, b}
    other = join(ServerSpec(("copilot",), (("COPILOT_HOME", "/other"),), logged_in=False), c)
    assert other is not first and set(live_servers()) == {first, other}
    assert "sk-secret" not in SPEC.key and len(SPEC.key) == 64
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
    server.client, server.proc = HangingClient(), sleeper  # spawned; the SDK's handshake still runs
    gate = asyncio.Event()
    server._starting = asyncio.get_running_loop().create_task(gate.wait())  # noqa: SLF001 - a start in flight
    leaving = asyncio.get_running_loop().create_task(server.leave(member))
    await asyncio.sleep(0)  # the leave runs up to the stop that never answers...
    leaving.cancel()  # ...and is cancelled there (a second Stop): the CLI must be gone anyway
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert sleeper.wait(5) == -9
    assert server._starting.cancelled() and live_servers() == []  # noqa: SLF001


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
    server._raw_event("sid-b", raw)  # noqa: SLF001 - what the JSON-RPC hook calls
    assert seen["a"] == [] and unattached_seen == [] and [e.type for e in seen["b"]] == ["tool.execution_complete"]
    for member in (intakes["a"], intakes["b"], unattached):
        await server.leave(member)
