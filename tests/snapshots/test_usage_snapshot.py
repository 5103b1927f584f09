"""Snapshot of usage on screen: the chat header's figures and the fleet's sum in the title bar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.domain.events import EventType
from tests.snapshots.fakes import Driver, build_app
from tests.snapshots.test_snapshots import Case, run_before_for


async def spenders(d: Driver) -> str:
    """Two sessions that reported usage: Copilot's shape (per call, context) and an ACP agent's
    (per turn, a cumulative cost); s1, the default session, reported none."""
    copilot = await d.add("copilot-work")
    await d.finished_turn(copilot, "explain the parser", "It splits lines into tokens.")
    d.emit(copilot, EventType.SESSION_USAGE_INFO, currentTokens=23_040, tokenLimit=128_000)
    d.emit(copilot, EventType.ASSISTANT_USAGE, model="gpt-4.1", inputTokens=10_321, outputTokens=412)
    d.emit(
        copilot, EventType.ASSISTANT_USAGE, model="gpt-4.1", inputTokens=2_004, outputTokens=830, cacheReadTokens=1_500
    )
    acp = await d.add("opencode-work")
    await d.finished_turn(acp, "fix the test", "Fixed.")
    d.emit(acp, EventType.ASSISTANT_USAGE, inputTokens=48_200, outputTokens=3_100)
    d.emit(acp, EventType.SESSION_USAGE_INFO, currentTokens=51_300, tokenLimit=200_000)
    d.emit(acp, "session.usage_info", cost={"amount": 0.0412, "currency": "USD"})
    await d.settle()
    return copilot


@pytest.mark.parametrize("select", ["s2", "s3"])  # Copilot's figures with cache reads; the ACP one's cost
def test_usage_in_the_header_and_title(select: str, snap_compare: Any, tmp_path: Path) -> None:
    case = Case(spenders, size=(120, 24), select=select)
    app = build_app(tmp_path, theme=case.theme)
    assert snap_compare(app, terminal_size=case.size, run_before=run_before_for(case))
