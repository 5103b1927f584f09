"""Every field an agent sends may be null or of the wrong type (claude-agent-acp's
``usage_update`` with ``"used": null`` left a traceback in engine.log). Each field of each
usage, tool, plan, message, permission and session update is replaced, one at a time, by
null and by values of every other JSON type, and sent through the mapping (the ACP mapper, the
Copilot intake) into a real manager: nothing raises, nothing logs a traceback or an error,
and the session's view and history can still be read and saved as JSON."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.agents.acp.mapping import UpdateMapper
from polypilot_tui.agents.copilot.busy import BusyFlag
from polypilot_tui.agents.copilot.intake import EventIntake
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.engine.codec import encode
from polypilot_tui.engine.manager import SessionManager

#: What a field may hold instead: null, and one value of every other JSON type.
ODD_VALUES: tuple[Any, ...] = (
    None,
    True,
    -1,
    10**30,
    1.5,
    "",
    "text",
    "http://[::1",
    "\x1b]52;c;eA==\x07",
    [],
    [None, 1, "x"],
    {},
    {"k": None},
)

ACP_UPDATES: tuple[dict[str, Any], ...] = (
    {"sessionUpdate": "usage_update", "used": 120, "size": 1000, "cost": {"amount": 0.5, "currency": "USD"}},
    {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": {"type": "text", "text": "hi"}},
    {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}},
    {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
    },
    {
        "sessionUpdate": "tool_call",
        "toolCallId": "t1",
        "title": "bash",
        "kind": "execute",
        "status": "in_progress",
        "rawInput": {"command": "ls", "cwd": "/"},
        "locations": [{"path": "/a", "line": 3}],
        "content": [{"type": "content", "content": {"type": "text", "text": "out"}}],
    },
    {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t1",
        "status": "completed",
        "rawOutput": {"output": "done", "exit_code": 0},
        "content": [
            {"type": "diff", "path": "/a", "oldText": "x", "newText": "y"},
            {"type": "terminal", "terminalId": "1"},
        ],
    },
    {"sessionUpdate": "plan", "entries": [{"content": "step", "priority": "high", "status": "pending"}]},
    {"sessionUpdate": "session_info_update", "title": "A title"},
    {"sessionUpdate": "current_mode_update", "currentModeId": "code"},
    {"sessionUpdate": "config_option_update", "configOptions": [{"id": "model", "currentValue": "m"}]},
    {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "x", "description": "y"}]},
)

COPILOT_EVENTS: tuple[dict[str, Any], ...] = (
    {"type": "assistant.turn_start", "data": {"turnId": "1"}},
    {"type": "assistant.usage", "data": {"inputTokens": 10, "outputTokens": 5, "cacheReadTokens": 2, "cost": 1}},
    {"type": "session.usage_info", "data": {"currentTokens": 100, "tokenLimit": 1000}},
    {"type": "assistant.message_delta", "data": {"messageId": "m1", "deltaContent": "hi"}},
    {"type": "assistant.reasoning_delta", "data": {"reasoningId": "r1", "deltaContent": "hmm"}},
    {"type": "assistant.reasoning", "data": {"reasoningId": "r1", "content": "hmm"}},
    {
        "type": "assistant.message",
        "data": {"messageId": "m1", "content": "hi", "toolRequests": [{"toolCallId": "t1", "name": "bash"}]},
    },
    {"type": "assistant.intent", "data": {"intent": "Reading"}},
    {
        "type": "tool.execution_start",
        "data": {"toolCallId": "t1", "toolName": "bash", "arguments": {"command": "ls"}, "mcpServerName": "s"},
    },
    {"type": "tool.execution_progress", "data": {"toolCallId": "t1", "progressMessage": "…"}},
    {"type": "tool.execution_partial_result", "data": {"toolCallId": "t1", "partialOutput": "o"}},
    {
        "type": "tool.execution_complete",
        "data": {
            "toolCallId": "t1",
            "toolName": "bash",
            "success": False,
            "result": {"content": "c", "detailedContent": "d"},
            "error": {"message": "permission denied", "code": "denied"},
        },
    },
    {
        "type": "permission.requested",
        "data": {
            "requestId": "p1",
            "permissionRequest": {
                "kind": "shell",
                "intention": "list",
                "fullCommandText": "ls",
                "commands": [{"identifier": "ls"}],
                "toolCallId": "t1",
                "canOfferSessionApproval": True,
            },
        },
    },
    {
        "type": "permission.requested",
        "data": {"requestId": "p2", "permissionRequest": {"kind": "url", "url": "https://x.example/a"}},
    },
    {
        "type": "permission.requested",
        "data": {"requestId": "p3", "permissionRequest": {"kind": "mcp", "serverName": "s", "toolName": "t"}},
    },
    {"type": "permission.completed", "data": {"requestId": "p1", "result": {"kind": "approved"}}},
    {"type": "session.title_changed", "data": {"title": "A title"}},
    {"type": "session.model_change", "data": {"newModel": "gpt-5", "previousModel": "gpt-4"}},
    {"type": "session.start", "data": {"sessionId": "s", "selectedModel": "gpt-5"}},
    {"type": "plan", "data": {"entries": [{"content": "step", "status": "pending"}]}},
    {"type": "user.message", "data": {"content": "hello"}},
    {"type": "assistant.turn_end", "data": {"turnId": "1"}},
    {"type": "session.error", "data": {"errorType": "x", "message": "boom", "statusCode": 429}},
    {"type": "session.idle", "data": {"aborted": False}},
    {"type": "abort", "data": {"reason": "user"}},
    {"type": "connection.lost", "data": {"reason": "gone"}},
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every field path of a JSON value (object keys and list indexes), outermost first."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield (*prefix, key)
            yield from paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield (*prefix, index)
            yield from paths(inner, (*prefix, index))


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    out = copy.deepcopy(value)
    node = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = copy.deepcopy(new)
    return out


def variants(base: dict[str, Any], fixed: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """``base`` with one field at a time replaced by each odd value (``fixed`` keys kept: they
    say what the message is), the whole message emptied, and the base itself."""
    yield base
    yield {key: base[key] for key in fixed}
    for path in paths(base):
        if path[0] in fixed and len(path) == 1:
            continue
        for odd in ODD_VALUES:
            yield replaced(base, path, odd)


@pytest.fixture
def manager(tmp_path: Path) -> SessionManager:
    settings = Settings.read(None, state_dir=tmp_path, record=False)
    return SessionManager(settings, load_agents(None), FakeClock())


async def fresh_turn(manager: SessionManager) -> str:
    """A session whose turn runs (the demo's `!hang` script: it says nothing on its own)."""
    sid = await manager.create_session("demo")
    await manager.send(sid, "!hang")
    return sid


def readable(manager: SessionManager, sid: str) -> None:
    """What a front end reads of the session can be built and written as JSON."""
    view = manager.view(sid)
    dump_json(encode(view))
    dump_json([encode(item) for item in manager.history(sid)])


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bad, [f"{r.name}: {r.getMessage()}" for r in bad[:5]]


async def test_acp_updates_with_any_field_null_or_of_another_type(
    manager: SessionManager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    sid = await fresh_turn(manager)
    for base in ACP_UPDATES:
        for update in variants(base, ("sessionUpdate",)):
            if manager.session(sid).turn is None and not manager.session(sid).recovering:
                await manager.send(sid, "!hang")  # while it recovers a send would only queue
            mapper = UpdateMapper(lambda event: manager.apply(sid, event))
            mapper.handle(update)
            mapper.note_permission_tool(update)
            mapper.finish()
            mapper.close_open_tools("the turn ended")
            replay = UpdateMapper(lambda event: manager.apply(sid, event), replay=True)
            replay.handle(update)
            replay.finish()
            readable(manager, sid)
    no_tracebacks(caplog)
    await manager.shutdown()


async def test_copilot_events_with_any_field_null_or_of_another_type(
    manager: SessionManager, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    sid = await fresh_turn(manager)
    for base in COPILOT_EVENTS:
        for raw in variants(base, ("type",)):
            if manager.session(sid).turn is None and not manager.session(sid).recovering:
                await manager.send(sid, "!hang")  # while it recovers a send would only queue
            intake = EventIntake(lambda event: manager.apply(sid, event), BusyFlag())
            intake.attach("copilot-session")
            intake.on_raw_event("copilot-session", raw)
            intake.close_open_tools()
            readable(manager, sid)
    no_tracebacks(caplog)
    await manager.shutdown()


async def test_events_of_odd_shapes_straight_into_the_engine(
    manager: SessionManager, caplog: pytest.LogCaptureFixture
) -> None:
    """What a mapper passes on as it came (``data`` fields of any type) reaches the reducer."""
    caplog.set_level(logging.DEBUG)
    sid = await fresh_turn(manager)
    for base in COPILOT_EVENTS:
        for raw in variants(base, ("type",)):
            if manager.session(sid).turn is None and not manager.session(sid).recovering:
                await manager.send(sid, "!hang")  # while it recovers a send would only queue
            data = raw.get("data")
            manager.apply(sid, AgentEvent(raw["type"], data if isinstance(data, dict) else {"value": data}))
            readable(manager, sid)
    no_tracebacks(caplog)
    await manager.shutdown()


async def test_a_field_of_the_wrong_type_is_not_taken_for_what_it_looks_like(manager: SessionManager) -> None:
    """A string "false" is no success and no abort; a count in a string is no count."""
    sid = await fresh_turn(manager)
    events = [
        {"type": "tool.execution_start", "data": {"toolCallId": "t1", "toolName": "bash"}},
        {"type": "tool.execution_complete", "data": {"toolCallId": "t1", "success": "false"}},
        {"type": "session.usage_info", "data": {"currentTokens": "500", "tokenLimit": [1000]}},
        {"type": "session.idle", "data": {"aborted": "false"}},
    ]
    for raw in events:
        manager.apply(sid, AgentEvent(raw["type"], raw["data"]))
    [tool] = [item for item in manager.history(sid) if item.tool_call_id == "t1"]
    assert tool.tool_status == "failed"
    session = manager.session(sid)
    assert session.turns[-1].outcome.value == "completed"  # ended by the idle, not as aborted
    assert session.usage.context_used is None and session.usage.context_size is None
    await manager.shutdown()
