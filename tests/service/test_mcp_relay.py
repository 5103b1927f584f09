"""The team relay as an agent runs it: a real process speaking MCP on stdio, calling a real
engine served on its Unix socket, with the capability the engine handed the session."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.limits import PROMPT_BYTES
from polypilot_tui.domain.team import TeamBounds
from polypilot_tui.domain.tool_servers import CAPABILITY_ENV, ToolServer, relay_server
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.verbs import ORCHESTRATE, TEAM_STATE, Orchestrate, SessionRef, WorkerState
from polypilot_tui.service.client import EngineClient
from polypilot_tui.service.mcp_relay import MAX_LISTED, TeamTools, states_text
from tests.support.engine_service import serving_in_process
from tests.support.mcp_stdio import started
from tests.support.waiting import until

pytestmark = pytest.mark.timeout(90)

TOOLS = ["list_workers", "start_worker", "send_worker", "wait_workers", "read_reply", "stop_worker"]


@dataclass
class Served:
    engine: LocalEngine
    socket: Path
    lead: str
    relay: ToolServer


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """An engine (demo agents, fast) served on its socket, with ``lead`` an orchestrator of depth 2."""
    settings = Settings.read(None, state_dir=tmp_path / "state", demo_speed=50, record=False)
    engine = build_engine(settings, load_agents(None), persist=False)
    async with serving_in_process(engine) as socket:
        lead = await engine.manager.create_session("demo", "lead")
        await engine.call(ORCHESTRATE, Orchestrate(lead, TeamBounds(depth=2)))
        await until(lambda: engine.manager.awaiting_tools(lead), 20, "the lead reconnected with its relay")
        (relay,) = engine.teams.tool_servers(lead)
        yield Served(engine, socket, lead, relay)
        await engine.close()


async def test_the_agent_lists_the_tools_the_engine_hears_it_and_they_drive_workers(served: Served) -> None:
    engine, lead = served.engine, served.lead
    async with started(served.relay) as relay:
        info = await relay.initialize()
        assert info["serverInfo"]["name"] == "polypilot"
        assert engine.manager.awaiting_tools(lead), "initialize alone is not the tools listed"
        tools = await relay.tools()
        assert [tool["name"] for tool in tools] == TOOLS
        assert all(tool["description"] for tool in tools)
        start = next(tool for tool in tools if tool["name"] == "start_worker")["inputSchema"]
        assert start["required"] == ["agent", "prompt"]
        assert start["properties"]["worktree"]["type"] == "boolean"
        await until(lambda: not engine.manager.awaiting_tools(lead), 10, "the relay's hello")

        assert await relay.call("list_workers") == (False, "You have no workers yet.")
        failed, said = await relay.call("start_worker", agent="demo", prompt="say hello", name="greeter")
        assert not failed, said
        worker = json.loads(said)["worker"]
        failed, said = await relay.call("wait_workers", workers=[worker], timeout_seconds=60)
        (ended,) = json.loads(said)
        assert not failed and ended["state"] == "done", said
        assert ended["seconds"] >= 0 and "started_at" not in ended  # durations, not the engine's clock
        failed, said = await relay.call("read_reply", worker=worker)
        assert not failed and said.startswith(f"Worker {worker}, its last turn: completed"), said
        replies = [i.text for i in engine.manager.history(worker) if i.kind.value == "assistant"]
        assert replies and replies[-1] in said, "the reply, whole"
        failed, said = await relay.call("send_worker", worker=worker, prompt="and again")
        assert not failed and json.loads(said)["worker"] == worker
        failed, said = await relay.call("stop_worker", worker=worker)
        assert not failed and json.loads(said)["state"] in ("stopped", "done"), said
        listed = json.loads((await relay.call("list_workers"))[1])
        assert [w["worker"] for w in listed] == [worker] and listed[0]["name"] == "greeter"
    assert relay.initialized_after is not None
    print(f"relay answered initialize {relay.initialized_after:.2f} s after its spawn")


async def test_an_engine_refusal_is_the_tool_error_in_the_engine_words(served: Served) -> None:
    async with started(served.relay) as relay:
        await relay.initialize()
        failed, said = await relay.call("start_worker", agent="no-such-agent", prompt="hi")
        assert failed and "no-such-agent" in said, said
        failed, said = await relay.call("read_reply", worker="nobody")
        assert failed and "no worker 'nobody' of yours" in said, said
        failed, said = await relay.call("start_worker", agent="demo", prompt="x" * (PROMPT_BYTES + 1))
        assert failed and f"at most {PROMPT_BYTES:,} (nothing was sent)" in said, said
        failed, said = await relay.call("wait_workers", timeout_seconds=10_000)
        assert failed and "at most 3600" in said, said
        failed, said = await relay.call("start_worker", agent="demo", prompt="   ")
        assert failed and "empty" in said
    assert (await served.engine.call(TEAM_STATE, SessionRef(served.lead))).workers == (), "nothing was started"


async def test_a_worker_capability_cannot_act_for_its_orchestrator(served: Served) -> None:
    engine = served.engine
    async with started(served.relay) as lead:
        await lead.initialize()
        first = json.loads((await lead.call("start_worker", agent="demo", prompt="one"))[1])["worker"]
        second = json.loads((await lead.call("start_worker", agent="demo", prompt="two"))[1])["worker"]
        await lead.call("wait_workers", timeout_seconds=60)
    (worker_relay,) = engine.teams.tool_servers(first)  # depth 2: the worker may start its own
    rows = len(engine.manager.history(second))
    assert dict(worker_relay.env)[CAPABILITY_ENV] != dict(served.relay.env)[CAPABILITY_ENV]
    async with started(worker_relay) as worker:
        await worker.initialize()
        assert await worker.call("list_workers") == (False, "You have no workers yet.")
        for tool, arguments in (
            ("read_reply", {"worker": second}),
            ("send_worker", {"worker": second, "prompt": "do my bidding"}),
            ("stop_worker", {"worker": second}),
            ("wait_workers", {"workers": [second], "timeout_seconds": 1}),
            ("read_reply", {"worker": first}),
        ):
            failed, said = await worker.call(tool, **arguments)
            assert failed and "of yours" in said, (tool, said)
    assert len(engine.manager.history(second)) == rows, "the sibling got nothing more"
    assert engine.manager.view(second).status.value == "idle"
    forged = replace(served.relay, env=((CAPABILITY_ENV, "forged-capability-0123456789"),))
    async with started(forged) as stranger:
        await stranger.initialize()
        failed, said = await stranger.call("list_workers")
        assert failed and said.endswith("unknown capability"), said


async def test_without_its_capability_every_tool_says_so_and_nothing_reaches_stderr(
    served: Served, tmp_path: Path
) -> None:
    log = tmp_path / "relay" / "relay.log"
    bare = replace(relay_server(served.relay.command, str(served.socket), "", str(log)), env=())
    env = {k: v for k, v in os.environ.items() if k != CAPABILITY_ENV}
    async with started(bare, env) as relay:
        await relay.initialize()
        assert len(await relay.tools()) == len(TOOLS)
        failed, said = await relay.call("list_workers")
        assert failed and f"started without its capability ({CAPABILITY_ENV})" in said
        assert served.engine.manager.awaiting_tools(served.lead), "no hello without a capability"
    assert relay.process.stderr is not None
    assert await relay.process.stderr.read() == b"", "the agent reads our stderr: nothing of ours goes there"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "started without" in log.read_text()


async def test_the_relay_log_is_private_and_holds_no_capability(served: Served, tmp_path: Path) -> None:
    log = tmp_path / "logs" / "relay.log"
    capability = dict(served.relay.env)[CAPABILITY_ENV]
    socket_gone = relay_server(served.relay.command, str(tmp_path / "gone.sock"), capability, str(log))
    async with started(socket_gone) as relay:
        await relay.initialize()
        await relay.tools()
        failed, said = await relay.call("list_workers")
        assert failed and "the polypilot engine does not answer" in said
    text = log.read_text()
    assert "the hello was not taken" in text and capability not in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and stat.S_IMODE(log.parent.stat().st_mode) == 0o700


async def test_a_long_wait_returns_at_the_slice_saying_to_call_again(served: Served) -> None:
    """Agents give up on a tool call after a minute: one wait_workers call waits a slice of it."""
    sliced = replace(served.relay, args=(*served.relay.args, "--wait-slice", "1"))
    async with started(sliced) as relay:
        await relay.initialize()
        # The demo agent asks permission to write; the policy asks the human: it stays blocked.
        failed, said = await relay.call("start_worker", agent="demo", prompt="please write a file for me")
        assert not failed, said
        worker = json.loads(said)["worker"]
        await until(lambda: served.engine.manager.view(worker).status.value == "awaiting_permission", 30, "blocked")
        began = time.monotonic()
        failed, said = await relay.call("wait_workers", timeout_seconds=30)
        assert time.monotonic() - began < 10
        assert not failed and json.loads(said.splitlines()[0])[0]["state"] == "blocked", said
        assert "returned after 1 s, the longest one call waits" in said and "call wait_workers again" in said
        failed, said = await relay.call("wait_workers", until="blocked", timeout_seconds=30)
        assert not failed and "call wait_workers again" not in said, "over before the slice: no note"


def test_what_the_relay_returns_is_bounded() -> None:
    states = [WorkerState(f"w{i}", f"worker {i}", "demo", "done") for i in range(MAX_LISTED + 5)]
    text = states_text(states)
    listed, note = text.rsplit("\n", 1)
    assert len(json.loads(listed)) == MAX_LISTED
    assert note == f"… and 5 more workers, not listed (at most {MAX_LISTED} are)."
    assert [w["worker"] for w in json.loads(states_text(states[:3]))] == ["w0", "w1", "w2"]  # short: all of it


async def test_a_repository_that_shadows_the_relay_imports_runs_none_of_it(served: Served, tmp_path: Path) -> None:
    """The agent starts the relay in the session's folder: a repository's own ``mcp`` or
    ``httpx`` there is not what the relay imports (``-P``: the folder is not on its path)."""
    repo = tmp_path / "repo"
    marker = tmp_path / "ran"
    for name in ("mcp", "httpx", "polypilot_tui"):
        (repo / name).mkdir(parents=True)
        (repo / name / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    (repo / "pydantic.py").write_text(f"open({str(marker)!r}, 'a').write('pydantic')\n")
    async with started(served.relay, cwd=repo) as relay:
        await relay.initialize()
        assert len(await relay.tools()) == len(TOOLS)
        assert await relay.call("list_workers") == (False, "You have no workers yet.")
    assert not marker.exists(), marker.read_text()


async def test_an_engine_that_never_answers_the_hello_holds_the_tool_list_a_bound_at_most(tmp_path: Path) -> None:
    """The hello goes before the tool list: an engine that takes the call and never answers
    must not keep the agent's tools from it (the client's own timeout is minutes)."""
    accepted = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        await reader.read()  # reads until the relay leaves; answers nothing
        writer.close()

    server = await asyncio.start_unix_server(silent, path=str(tmp_path / "silent.sock"))
    client = EngineClient(tmp_path / "silent.sock")
    try:
        tools = TeamTools(client, "a-capability", hello_timeout=0.3)
        began = time.monotonic()
        async with asyncio.timeout(10):  # red, not hung, when the bound is missing
            await tools.hello()
        assert accepted.is_set() and not tools.hello_said
        assert time.monotonic() - began < 5
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
