"""The engine hands every session's agent its tool servers at every open of its session (new,
resume, load), as ACP's ``mcpServers`` and the Copilot SDK's ``mcp_servers``, and no secret
of theirs reaches a transcript."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.agents.acp.link import TRANSCRIPT
from polypilot_tui.agents.copilot.connection import sdk_mcp_servers
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.tool_servers import CAPABILITY_ENV, ToolServer, relay_server
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.infra.redact import REDACTED
from tests.agents.acp_support import FAKE_AGENT
from tests.support.waiting import until

pytestmark = pytest.mark.timeout(60)

CAPABILITY = "cap-7f3a9c2e-handoff-test-secret"


def handed(state: Path) -> list[dict[str, Any]]:
    """What the fake agent was handed at each open, oldest first."""
    path = state / "mcp-servers.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def fake_agent(name: str, state: Path, workspace: Path, caps: str) -> AgentConfig:
    return AgentConfig(
        name=name,
        kind="acp",
        command=sys.executable,
        args=[str(FAKE_AGENT)],
        cwd=workspace,
        env={"FAKE_ACP_STATE": str(state), "FAKE_ACP_CAPS": caps},
    )


async def test_an_acp_agent_is_handed_its_tool_servers_at_new_resume_and_load(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agents = {
        "resumer": fake_agent("resumer", tmp_path / "resumer-state", workspace, "load,resume"),
        "loader": fake_agent("loader", tmp_path / "loader-state", workspace, "load"),
    }
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    manager = SessionManager(settings, AgentCatalog(agents), SystemClock())
    asked: list[str] = []
    relay = relay_server(sys.executable, str(tmp_path / "engine.sock"), CAPABILITY, str(tmp_path / "relay.log"))

    def tool_servers(session_id: str) -> tuple[ToolServer, ...]:
        asked.append(session_id)
        return (relay,)

    manager.tool_servers = tool_servers
    try:
        resumer = await manager.create_session("resumer")
        loader = await manager.create_session("loader")
        await manager.reconnect(resumer)
        await manager.reconnect(loader)
    finally:
        await manager.shutdown()

    assert asked == [resumer, loader, resumer, loader], "asked at every open of every session"
    wire = {
        "name": "polypilot",
        "command": sys.executable,
        "args": ["-P", "-m", "polypilot_tui.service.mcp_relay", "--socket", str(tmp_path / "engine.sock")]
        + ["--log", str(tmp_path / "relay.log")],
        "env": [{"name": CAPABILITY_ENV, "value": CAPABILITY}],
    }
    assert handed(tmp_path / "resumer-state") == [
        {"method": "session/new", "servers": [wire]},
        {"method": "session/resume", "servers": [wire]},
    ]
    assert handed(tmp_path / "loader-state") == [
        {"method": "session/new", "servers": [wire]},
        {"method": "session/load", "servers": [wire]},
    ]
    # The raw transcript records session/new's params whole: the capability is not in it.
    for sid in (resumer, loader):
        transcript = (manager.workdir(sid) / TRANSCRIPT).read_text()
        assert '"mcpServers"' in transcript and CAPABILITY_ENV in transcript
        assert CAPABILITY not in transcript and REDACTED in transcript


async def test_a_tool_server_that_cannot_be_handed_fails_the_connect_saying_why(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agents = {"fake": fake_agent("fake", tmp_path / "agent-state", workspace, "load,resume")}
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    manager = SessionManager(settings, AgentCatalog(agents), SystemClock())
    manager.tool_servers = lambda sid: (ToolServer("polypilot", "python3", ("-m", "x")),)
    try:
        with pytest.raises(Exception, match="its command must be an absolute path"):
            await manager.create_session("fake")
    finally:
        await manager.shutdown()
    assert handed(tmp_path / "agent-state") == [], "nothing was opened with a server the agent cannot start"


def test_the_copilot_sdk_gets_stdio_servers_exposing_every_tool() -> None:
    relay = relay_server("/usr/bin/python3", "/run/engine.sock", CAPABILITY)
    assert sdk_mcp_servers((relay,)) == {
        "polypilot": {
            "type": "stdio",
            "command": "/usr/bin/python3",
            "args": ["-P", "-m", "polypilot_tui.service.mcp_relay", "--socket", "/run/engine.sock"],
            "env": {CAPABILITY_ENV: CAPABILITY},
            "tools": ["*"],
        }
    }
    assert sdk_mcp_servers(()) == {}


async def test_a_reconnect_before_any_turn_forgets_nothing_and_says_no_loss(tmp_path: Path) -> None:
    """Making a session an orchestrator reconnects it at once; an agent that keeps no session it
    was never prompted in (the Copilot CLI) starts a new one: no conversation was lost."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agents = {"fake": fake_agent("fake", tmp_path / "agent-state", workspace, "")}  # resumes nothing
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    manager = SessionManager(settings, AgentCatalog(agents), SystemClock())
    try:
        fresh = await manager.create_session("fake")
        await manager.reconnect(fresh)
        raced = await manager.create_session("fake")
        reconnecting = asyncio.create_task(manager.reconnect(raced))
        await asyncio.sleep(0)  # the first prompt goes out while the reconnect is under way
        await manager.send(raced, "hello")
        await reconnecting
        await until(lambda: manager.session(raced).turns, 30, "the raced turn ending")
        talked = await manager.create_session("fake")
        await manager.send(talked, "hello")
        await until(lambda: manager.session(talked).turns, 30, "the turn ending")
        await manager.reconnect(talked)
    finally:
        await manager.shutdown()
    for sid in (fresh, raced):
        rows = [(i.kind, i.text) for i in manager.history(sid)]
        assert not [text for kind, text in rows if kind is ItemKind.ERROR], rows
        assert any("there was no conversation to resume" in text for _, text in rows), rows
    talked_errors = [i.text for i in manager.history(talked) if i.kind is ItemKind.ERROR]
    assert any("does not remember the conversation above" in text for text in talked_errors), "a real loss is said"
