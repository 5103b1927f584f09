"""Listing and switching a session's model through the engine, on the demo agent."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from polypilot_tui.agents.base import BackendError
from polypilot_tui.agents.demo.backend import DemoBackend
from polypilot_tui.config import AgentConfig, Settings, load_agents
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.model_switch import BUSY
from polypilot_tui.engine.persistence import attach_persistence
from tests.support.engine import Harness


async def test_the_demo_offers_three_models_and_switches_between_turns(harness: Harness) -> None:
    engine = harness.engine
    sid = await harness.new()
    choices = await engine.call(verbs.MODELS, verbs.SessionRef(sid))
    assert choices.current == "demo-model" == engine.view(sid).model
    assert [o.id for o in choices.options] == ["demo-model", "demo-fast", "demo-deep"]

    await engine.call(verbs.SET_MODEL, verbs.SetModel(sid, "demo-deep"))
    assert engine.view(sid).model == "demo-deep"
    assert (await engine.call(verbs.MODELS, verbs.SessionRef(sid))).current == "demo-deep"  # the agent's own answer
    assert harness.manager.session(sid).model_choice == "demo-deep"
    last = engine.history(sid)[-1]
    assert last.kind is ItemKind.SYSTEM and "Model switched to demo-deep" in last.text


async def test_a_model_the_agent_does_not_offer_is_refused(harness: Harness) -> None:
    engine = harness.engine
    sid = await harness.new()
    with pytest.raises(EngineError, match="does not offer the model 'gpt-9'.*demo-fast"):
        await engine.call(verbs.SET_MODEL, verbs.SetModel(sid, "gpt-9"))
    with pytest.raises(EngineError, match="name a model"):
        await engine.call(verbs.SET_MODEL, verbs.SetModel(sid, "  "))
    assert engine.view(sid).model == "demo-model" and harness.manager.session(sid).model_choice == ""


async def test_a_switch_while_a_turn_runs_is_refused_and_works_after_it(harness: Harness) -> None:
    engine = harness.engine
    sid = await harness.new()
    await engine.call(verbs.SEND, verbs.Send(sid, "!slow"))
    await harness.clock.settle()
    assert engine.view(sid).status.busy
    with pytest.raises(EngineError, match="a turn is running"):
        await engine.call(verbs.SET_MODEL, verbs.SetModel(sid, "demo-fast"))
    assert engine.view(sid).model == "demo-model"
    await harness.until_rest(sid)
    await engine.call(verbs.SET_MODEL, verbs.SetModel(sid, "demo-fast"))
    assert engine.view(sid).model == "demo-fast"
    assert BUSY.startswith("a turn is running")


async def test_an_unknown_session_is_said(harness: Harness) -> None:
    engine = harness.engine
    with pytest.raises(EngineError, match="no session"):
        await engine.call(verbs.MODELS, verbs.SessionRef("nope"))


def _engine(state: Path) -> LocalEngine:
    settings = Settings.read(None, state_dir=state, demo_speed=50.0)
    return LocalEngine(SessionManager(settings, load_agents(None), SystemClock()), attach_persistence)


async def _turn_ended(engine: LocalEngine, sid: str, turns: int) -> None:
    for _ in range(1000):
        if engine.manager.session(sid).turns and len(engine.manager.session(sid).turns) >= turns:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the turn did not end")


async def test_a_restart_keeps_the_chosen_model(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    await engine.start()
    sid = await engine.call(verbs.NEW_SESSION, verbs.NewSession("demo", "pick"))
    await engine.call(verbs.SET_MODEL, verbs.SetModel(sid, "demo-fast"))
    await engine.close()

    again = _engine(tmp_path)
    await again.start()
    assert again.view(sid).model == "demo-fast"  # saved: shown before the agent starts
    assert again.manager.backend(sid) is None
    await again.call(
        verbs.SEND, verbs.Send(sid, "hello")
    )  # connects: a new demo agent session starts at its default...
    await _turn_ended(again, sid, 1)
    backend = again.manager.backend(sid)
    assert backend is not None
    assert (await backend.models()).current == "demo-fast"  # ...and the engine set the choice again
    assert again.view(sid).model == "demo-fast"
    await again.close()


async def test_a_choice_the_agent_refuses_after_a_restart_is_told_and_the_session_works(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    await engine.start()
    sid = await engine.call(verbs.NEW_SESSION, verbs.NewSession("demo", "pick"))
    await engine.call(verbs.SET_MODEL, verbs.SetModel(sid, "demo-fast"))
    await engine.close()

    again = _engine(tmp_path)
    await again.start()
    again.manager.session(sid).model_choice = "demo-retired"  # as if the agent dropped the model
    await again.call(verbs.SEND, verbs.Send(sid, "hello"))
    await _turn_ended(again, sid, 1)
    texts = [item.text for item in again.history(sid) if item.kind is ItemKind.ERROR]
    assert any("demo-retired" in text and "could not be set again" in text for text in texts)
    assert len(again.manager.session(sid).turns) == 1  # the turn ran on the agent's own model
    await again.close()


async def test_a_demo_agent_configured_with_another_model_offers_it_too(tmp_path: Path) -> None:
    settings = Settings.read(None, state_dir=tmp_path)
    agent = AgentConfig(name="demo2", kind="demo", model="demo-custom")
    backend = DemoBackend(agent, lambda event: None, SystemClock(), settings, tmp_path / "s")
    await backend.connect(None)
    choices = await backend.models()
    assert choices.current == "demo-custom" and choices.options[-1].description == "configured"
    await backend.set_model("demo-fast")
    await backend.set_model("demo-custom")  # back to the configured one: still offered
    assert (await backend.models()).current == "demo-custom"
    with pytest.raises(BackendError, match="no model 'gpt-9'"):
        await backend.set_model("gpt-9")
    await backend.close()


def test_an_agents_repeated_or_endless_model_list_is_one_row_per_model() -> None:
    from polypilot_tui.domain.model_choice import MAX_OPTIONS, ModelChoices, ModelOption

    twice = ModelChoices("a", (ModelOption("a", "A"), ModelOption("b"), ModelOption("a", "A again")))
    assert [(o.id, o.name) for o in twice.options] == [("a", "A"), ("b", "")]
    endless = ModelChoices("", tuple(ModelOption(f"m{i}") for i in range(MAX_OPTIONS + 50)))
    assert len(endless.options) == MAX_OPTIONS
