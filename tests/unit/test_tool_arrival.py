"""The engine checks that the team tools it handed an agent arrived: the relay's hello within
``team_tools_seconds`` of the connect or of the first turn sent after it (the Copilot CLI
starts its tool servers only then), else the session says so, naming the agent."""

from __future__ import annotations

import pytest

from polypilot_tui.config import Settings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.tool_servers import ToolServer, relay_server
from polypilot_tui.engine.api import UnknownCapability
from polypilot_tui.infra.redact import REDACTOR
from tests.support.engine import Harness, demo_harness

BOUND = 20.0
NOT_ARRIVED = "The team tools did not reach demo within 20 s"


def harness(capabilities: dict[str, str]) -> Harness:
    """Sessions s1, s2… on the demo agent; each handed a relay with its capability in ``capabilities``."""
    h = demo_harness(Settings.read(None, team_tools_seconds=BOUND, record=False))

    def tool_servers(session_id: str) -> tuple[ToolServer, ...]:
        capability = capabilities.get(session_id)
        return (relay_server("/usr/bin/python3", "/run/engine.sock", capability),) if capability else ()

    h.manager.tool_servers = tool_servers
    return h


def rows(h: Harness, sid: str, kind: ItemKind) -> list[str]:
    return [item.text for item in h.manager.history(sid) if item.kind is kind]


async def test_no_hello_within_the_bound_of_a_turn_is_said_in_the_session_naming_the_agent() -> None:
    h = harness({"s1": "cap-s1-0123456789", "s2": "cap-s2-0123456789"})
    s1, s2 = await h.new(), await h.new()
    await h.clock.advance(BOUND * 3)
    assert not any(NOT_ARRIVED in text for text in rows(h, s1, ItemKind.ERROR)), "an idle agent may list them yet"
    await h.manager.send(s1, "hello")
    await h.manager.send(s2, "hello")
    await h.clock.advance(BOUND - 1)
    assert h.manager.tools_arrived("cap-s2-0123456789") == s2
    assert not any(NOT_ARRIVED in text for text in rows(h, s1, ItemKind.ERROR))
    await h.clock.advance(1)
    [said] = [text for text in rows(h, s1, ItemKind.ERROR) if NOT_ARRIVED in text]
    assert "cannot start or reach workers" in said and "Reconnect" in said
    assert not any(NOT_ARRIVED in text for text in rows(h, s2, ItemKind.ERROR)), "its relay said hello in time"
    # A late hello is told too: the tools are there after all.
    await h.clock.advance(5)
    assert h.manager.tools_arrived("cap-s1-0123456789") == s1
    assert any("reached demo after all (25 s)" in text for text in rows(h, s1, ItemKind.SYSTEM))
    await h.manager.send(s1, "again")
    await h.clock.advance(BOUND * 3)
    assert len([t for t in rows(h, s1, ItemKind.ERROR) if NOT_ARRIVED in t]) == 1, "said once"


async def test_a_hello_at_the_connect_needs_no_turn() -> None:
    h = harness({"s1": "cap-s1-0123456789"})
    sid = await h.new()
    h.manager.tools_arrived("cap-s1-0123456789")
    assert not h.manager.awaiting_tools(sid)
    await h.manager.send(sid, "hello")
    await h.clock.advance(BOUND * 3)
    assert not any(NOT_ARRIVED in text for text in rows(h, sid, ItemKind.ERROR))


async def test_a_session_handed_no_relay_awaits_no_hello() -> None:
    h = harness({})
    sid = await h.new()
    await h.manager.send(sid, "hello")
    await h.clock.advance(BOUND * 3)
    assert not any(NOT_ARRIVED in text for text in rows(h, sid, ItemKind.ERROR))


async def test_each_connect_awaits_its_own_hello_and_a_closed_session_none() -> None:
    h = harness({"s1": "cap-s1-0123456789", "s2": "cap-s2-0123456789"})
    s1, s2 = await h.new(), await h.new()
    await h.manager.send(s1, "hello")
    await h.manager.send(s2, "hello")
    await h.clock.advance(BOUND / 2)
    await h.manager.reconnect(s1)  # handed again: awaited anew, from its next turn
    await h.manager.close(s2)
    await h.clock.advance(BOUND * 2)
    assert not any(NOT_ARRIVED in text for text in rows(h, s1, ItemKind.ERROR))
    await h.manager.send(s1, "again")
    await h.clock.advance(BOUND / 2 + 1)
    assert not any(NOT_ARRIVED in text for text in rows(h, s1, ItemKind.ERROR))
    await h.clock.advance(BOUND / 2)
    assert any(NOT_ARRIVED in text for text in rows(h, s1, ItemKind.ERROR))
    with pytest.raises(UnknownCapability):
        h.manager.tools_arrived("cap-s2-0123456789")


async def test_a_capability_never_handed_out_is_refused() -> None:
    h = harness({"s1": "cap-s1-0123456789"})
    await h.new()
    for forged in ("cap-s1-012345678", "cap-s1-0123456789x", ""):
        with pytest.raises(UnknownCapability):
            h.manager.tools_arrived(forged)


async def test_a_handed_capability_is_redacted_wherever_it_would_be_written() -> None:
    capability = "cap-never-seen-before-4242"
    assert capability in REDACTOR.text(f"the relay of {capability}")
    h = harness({"s1": capability})
    await h.new()
    assert REDACTOR.text(f"the relay of {capability}") == "the relay of [redacted]"
