"""Hostile CLI events through the JSON-RPC hook (runtime.install_hooks), the intake and a real
engine session: whatever the CLI sends, nothing escapes the hook and nothing is kept unbounded.

The hook hands every event the SDK does not act on to the intake raw, so a malformed event
no longer meets the SDK's parser (which turned any odd shape into its raw fallback)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from copilot.generated.session_events import session_event_from_dict

from polypilot_tui.agents.base import NullBackend
from polypilot_tui.agents.copilot.busy import BusyFlag
from polypilot_tui.agents.copilot.intake import EventIntake
from polypilot_tui.agents.copilot.runtime import install_hooks
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.limits import ROW_CHARS
from polypilot_tui.domain.view import make_view
from polypilot_tui.engine.manager import SessionManager
from tests.agents.copilot_support import FakeRpc


class Wired:
    """A manager session fed by an intake behind the hook, as a shared CLI feeds it."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = FakeClock()
        self.backends: list[NullBackend] = []
        settings = Settings.read(None, state_dir=tmp_path)
        catalog = AgentCatalog({"push": AgentConfig(name="push", kind="demo")})

        def factory(agent: str, sink: Any, workdir: Path) -> NullBackend:
            self.backends.append(NullBackend(sink))
            return self.backends[-1]

        self.manager = SessionManager(settings, catalog, self.clock, backend_factory=factory, id_factory=lambda: "s")
        self.intake: EventIntake | None = None

    def _sdk(self, method: str, params: Any) -> None:
        # The SDK's own handler: parse, then dispatch to the session's on_event.
        if method == "session.event":
            event = session_event_from_dict(params["event"])
            assert self.intake is not None
            self.intake.on_sdk_event(event)

    async def start(self) -> None:
        await self.manager.create_session("push")
        self.intake = EventIntake(self.backends[-1].sink, BusyFlag())
        self.intake.attach("cli-1")
        self.rpc = FakeRpc(self._sdk)
        install_hooks(
            type("Client", (), {"_client": self.rpc})(),
            asyncio.get_running_loop(),
            on_raw_event=self.intake.on_raw_event,
            on_closed=lambda: None,
        )
        await self.manager.send("s", "go")

    async def notify(self, *events: Any, session_id: Any = "cli-1") -> None:
        for event in events:
            self.rpc.notification_handler("session.event", {"sessionId": session_id, "event": event})
            await self.clock.settle(2)


HUGE = "x" * (ROW_CHARS * 3)


@pytest.mark.parametrize(
    "kind",
    [["assistant.message"], {"a": 1}, [], {}],
    ids=["list", "object", "empty-list", "empty-object"],
)
async def test_an_event_whose_type_is_not_a_string_does_not_escape_the_hook(tmp_path: Path, kind: Any) -> None:
    """Before the raw path, such an event failed the SDK's parser and came to us raw as an
    ``unknown`` event; it must not raise out of the notification handler (the loop would log
    it as an unhandled callback error and the event would be lost)."""
    wired = Wired(tmp_path)
    await wired.start()
    await wired.notify({"type": kind, "data": {}})
    await wired.notify({"type": "session.idle", "data": {}})
    assert [t.outcome.value for t in wired.manager.session("s").turns] == ["completed"]


async def test_malformed_events_neither_crash_nor_grow_what_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wired = Wired(tmp_path)
    await wired.start()
    deep: Any = "leaf"
    for _ in range(200):
        deep = {"d": [deep]}
    caplog.set_level(logging.DEBUG)
    await wired.notify({"type": "session.idle", "data": {}}, session_id=None)  # no id: not ours
    await wired.notify({"type": "session.idle", "data": {}}, session_id=["cli-1"])  # not ours either
    session = wired.manager.session("s")
    assert session.turn is not None  # neither idle above was for this session
    await wired.notify(
        {"type": "assistant.turn_start", "data": {"turnId": 5}},
        {"type": 7, "data": {}},
        {"type": None},
        {"data": {"content": "no type"}},
        {"type": "assistant.message_delta", "data": "not an object"},
        {"type": "assistant.message_delta", "data": [1, 2, 3]},
        {"type": "assistant.message_delta", "data": {"messageId": {"x": 1}, "deltaContent": ["a"]}},
        {"type": "assistant.message_delta", "data": {"messageId": "m", "deltaContent": HUGE}},
        {"type": "assistant.message", "data": {"messageId": "m", "content": HUGE, "extra": deep}},
        {"type": "assistant.reasoning", "data": {"reasoningId": 1, "content": {"deep": deep}}},
        {"type": "tool.execution_start", "data": {"toolCallId": ["t"], "toolName": HUGE, "arguments": deep}},
        {"type": "tool.execution_start", "data": {"toolCallId": "t1", "toolName": "bash", "arguments": deep}},
        {"type": "tool.execution_partial_result", "data": {"toolCallId": "t1", "partialOutput": HUGE}},
        {"type": "tool.execution_complete", "data": {"toolCallId": "t1", "success": "yes", "result": HUGE}},
        {"type": "session.title_changed", "data": {"title": HUGE}},
        {"type": "session.model_change", "data": {"newModel": HUGE}},
        {"type": "session.usage_info", "data": {"currentTokens": 10**30, "tokenLimit": -1}},
        {"type": "assistant.usage", "data": {"inputTokens": float("inf"), "outputTokens": "9"}},
        {"type": "session.error", "data": {"errorType": deep, "message": HUGE, "statusCode": "429"}},
        {"type": "model.messages_snapshot", "data": {"messages": deep, "big": HUGE}},
        {"type": "system.message", "data": {"content": HUGE, "contentBlocks": deep}},
        {"type": "subagent.started", "data": deep},
        {"type": "permission.requested", "data": {"requestId": ["r"], "permissionRequest": HUGE}},
        {"type": "permission.requested", "data": deep},
        "an event that is a string",
        ["an", "event", "that", "is", "a", "list"],
        None,
    )
    await wired.notify({"type": "session.idle", "data": {}})
    assert [t.outcome.value for t in session.turns] == ["failed"]  # by its session.error
    view = make_view(session)
    assert len(view.title or "") <= 200 and len(session.model or "") <= 256
    for item in session.history:
        assert len(item.text) <= ROW_CHARS + 200, (item.kind, len(item.text))
    unexpected = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not unexpected, [r.getMessage() for r in unexpected]


@pytest.mark.parametrize("session_id", [None, "", 0, False], ids=["null", "empty", "zero", "false"])
async def test_an_event_naming_no_session_reaches_no_intake_not_yet_attached(session_id: Any) -> None:
    """Before the raw path the SDK looked such an id up in its session table and found none;
    an intake that has no session yet (its CLI joined, its create not sent) must not take it."""
    emitted: list[str] = []
    intake = EventIntake(lambda event: emitted.append(event.type), BusyFlag())
    rpc = FakeRpc(lambda method, params: None)
    install_hooks(
        type("Client", (), {"_client": rpc})(),
        asyncio.get_running_loop(),
        on_raw_event=intake.on_raw_event,
        on_closed=lambda: None,
    )
    rpc.notification_handler("session.event", {"sessionId": session_id, "event": {"type": "session.error", "data": {}}})
    rpc.notification_handler("session.event", {"event": {"type": "session.idle", "data": {}}})
    assert emitted == []


async def test_an_event_the_sdk_acts_on_with_a_timestamp_its_date_parser_overflows_on_reaches_us_raw(
    tmp_path: Path,
) -> None:
    """The SDK still parses its own events (a permission prompt here); dateutil raises
    OverflowError, not a ValueError, on a year past 9999: without the fallback the prompt
    would be lost and the turn would wait for an answer no one is asked for."""
    wired = Wired(tmp_path)
    await wired.start()
    request = {"kind": "shell", "fullCommandText": "rm x", "intention": "Remove x", "commands": []}
    await wired.notify(
        {
            "type": "permission.requested",
            "id": "00000000-0000-0000-0000-000000000001",
            "timestamp": "99999999999999999999-01-01",
            "data": {"requestId": "r1", "permissionRequest": request},
        }
    )
    view = make_view(wired.manager.session("s"))
    assert view.pending_permission is not None and view.pending_permission.request_id == "r1"
