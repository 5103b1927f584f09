"""Usage travels and lasts: on the wire to attached dashboards, in ``sessions.json`` across a
restart, and in ``status --json`` (with the app running and without it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from polypilot_tui.commands.status import live_row, status_document
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.usage import Usage
from polypilot_tui.engine.codec import session_state, view_from_json
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import Persistence
from polypilot_tui.storage.registry import REGISTRY_FILE, Registry, SessionRecord
from tests.support.waiting import until

SPENT = Usage(
    input_tokens=52_000,
    output_tokens=1_234,
    cached_tokens=800,
    context_used=18_000,
    context_size=128_000,
    cost=0.04,
    currency="USD",
    cost_mark=0.04,
    reported=True,
)
REPORTS = [
    AgentEvent("assistant.usage", {"inputTokens": 30_000, "outputTokens": 1_000, "cacheReadTokens": 800}),
    AgentEvent("assistant.usage", {"inputTokens": 22_000, "outputTokens": 234}),
    AgentEvent("session.usage_info", {"currentTokens": 18_000, "tokenLimit": 128_000}),
    AgentEvent("session.usage_info", {"cost": {"amount": 0.04, "currency": "USD"}}),
]


def open_app(state: Path) -> tuple[SessionManager, Persistence, Settings]:
    settings = Settings.read(None, state_dir=state, demo_speed=20.0)
    manager = SessionManager(settings, load_agents(None), SystemClock())
    persistence = Persistence(manager, settings, registry_delay=0.05)
    persistence.start()
    return manager, persistence, settings


def saved_usage(state: Path, sid: str) -> Any:
    try:
        sessions = json.loads((state / REGISTRY_FILE).read_text())["sessions"]
    except FileNotFoundError:
        return None
    return next((s.get("usage") for s in sessions if s["id"] == sid), None)


async def test_a_restarted_app_shows_what_the_session_used(tmp_path: Path) -> None:
    manager, persistence, settings = open_app(tmp_path)
    sid = await manager.create_session("demo", "spender")
    for event in REPORTS:
        manager.apply(sid, event)  # as the agent reports them
    assert manager.view(sid).usage == SPENT
    await until(lambda: (saved_usage(tmp_path, sid) or {}).get("input_tokens") == 52_000, 5, "the usage saved")
    await manager.shutdown()
    await persistence.close()

    [row] = status_document(settings)["sessions"]  # the app is gone: the registry answers
    assert row["usage"] == SPENT.to_json() and "cost_mark" not in row["usage"]
    again, persistence, _ = open_app(tmp_path)
    assert again.view(sid).usage == SPENT
    again.apply(sid, AgentEvent("assistant.usage", {"inputTokens": 1_000, "outputTokens": 6}))
    again.apply(sid, AgentEvent("session.usage_info", {"cost": {"amount": 0.05, "currency": "USD"}}))
    usage = again.view(sid).usage
    assert (usage.input_tokens, usage.output_tokens) == (53_000, 1_240)  # counted on, not from zero
    assert usage.cost is not None and abs(usage.cost - 0.05) < 1e-9  # the cumulative report's growth only
    await again.shutdown()
    await persistence.close()


def test_a_registry_without_usage_reads_as_none_reported(tmp_path: Path) -> None:
    doc = {"sessions": [{"id": "old", "name": "n", "agent": "demo"}, {"id": "bad", "name": "n", "agent": "demo"}]}
    doc["sessions"][1]["usage"] = {"input_tokens": "many", "output_tokens": 7, "cost": float("inf")}
    (tmp_path / REGISTRY_FILE).write_text(json.dumps(doc))
    old, bad = Registry(tmp_path).load().sessions
    assert old.usage == Usage()
    assert (bad.usage.input_tokens, bad.usage.output_tokens, bad.usage.cost, bad.usage.reported) == (0, 7, None, True)


def test_the_registry_keeps_usage(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    registry.save([SessionRecord(id="s1", name="n", agent="demo", usage=SPENT)], 1.0)
    assert registry.load().sessions[0].usage == SPENT


async def test_usage_reaches_an_attached_dashboard_exactly(tmp_path: Path) -> None:
    manager, persistence, _ = open_app(tmp_path)
    sid = await manager.create_session("demo")
    for event in REPORTS:
        manager.apply(sid, event)
    view = manager.view(sid)
    text = dump_json(session_state(view, None, ""))  # strict JSON, as the service sends it
    back = view_from_json(json.loads(text)["view"])
    assert back == view and repr(back.usage) == repr(SPENT)  # ints stay ints, floats floats
    assert live_row(back, None, 0.0)["usage"] == SPENT.to_json()  # status --json from a running engine
    assert back.to_json()["usage"] == SPENT.to_json()  # ls --json
    await manager.shutdown()
    await persistence.close()
