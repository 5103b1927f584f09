"""Usage from the real agents' own reports, through the engine, against the scripted model.

The model server answers every call with token counts of its own (a quarter of the request's
and the reply's JSON size) and remembers what it sent (``usage_reports``). Each agent passes
them on in its own shape, and the session's view must carry exactly those numbers: a figure
dropped or counted twice fails here. What each agent reports was measured with these tests:

- Copilot CLI: ``assistant.usage`` per model call (a tool turn makes two), so the view sums
  every call the server answered; ``session.usage_info`` gives the context window.
- opencode: its turn's usage at the turn end (one model call per text turn), its context in
  ``usage_update`` (the call's input) with a cumulative cost of 0 USD.
- codex-acp: no token counts at all, only ``usage_update``: the context it used is the last
  call's input plus output. The view must invent nothing else.

Each test reconnects between its turns: a resumed or loaded session must not count its past again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from msgspec import structs

from polypilot_tui.agents.base import ALLOW_ONCE
from polypilot_tui.agents.npm_cache import NpmAgent
from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.ui.usage_text import compact_count, usage_summary
from tests.support.acp_agents import BUILDERS, PACKAGES
from tests.support.copilot_harness import AGENT, make_manager
from tests.support.model_script import offered_tools
from tests.support.model_server import ModelServer, UsageReport
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]


async def turn(manager: SessionManager, sid: str, prompt: str) -> None:
    """Send ``prompt``, allow what it asks, and wait until the turn has ended."""
    session = manager.session(sid)
    done = len(session.turns) + 1

    def ended_or_asking() -> bool:
        return (session.turn is None and len(session.turns) >= done) or bool(
            session.turn and session.turn.pending_permissions
        )

    await manager.send(sid, prompt)
    while True:
        await until(ended_or_asking, 60, f"the end of turn {done}")
        if session.turn is None:
            return
        await manager.answer_permission(sid, next(iter(session.turn.pending_permissions)), ALLOW_ONCE)


def turn_calls(server: ModelServer) -> list[UsageReport]:
    """What the server told the agent about the calls of the turns (title and summary requests
    offer no tools, and no agent counts them in a turn)."""
    return [r for r in server.usage_reports() if isinstance(r.request.body, dict) and offered_tools(r.request.body)]


async def test_copilot_sums_every_model_call(copilot_cli: Path, model_server: ModelServer, tmp_path: Path) -> None:
    manager = make_manager(copilot_cli, model_server, tmp_path)
    try:
        sid = await manager.create_session(AGENT)
        await turn(manager, sid, "hello there")
        first = manager.view(sid).usage
        assert (await manager.reconnect(sid)).how == "resumed"  # a resume must not report the past again
        await turn(manager, sid, "TOOL now")  # a tool call and the answer to its result: two calls
        calls = model_server.usage_reports()
        assert len(calls) == 3 and calls == turn_calls(model_server)
        usage = manager.view(sid).usage
        assert (first.input_tokens, first.output_tokens) == (calls[0].prompt_tokens, calls[0].completion_tokens)
        assert usage.input_tokens == sum(c.prompt_tokens for c in calls)
        assert usage.output_tokens == sum(c.completion_tokens for c in calls)
        assert usage.context_size == 128_000 and usage.context_used is not None
        assert 0 < usage.context_used < calls[-1].prompt_tokens  # the CLI's own count of its context
        assert usage.cost is None  # the CLI's cost is a billing multiplier, not money
        assert usage_summary(usage).startswith(f"{compact_count(usage.input_tokens)} in · ")
    finally:
        await manager.shutdown()


@pytest.mark.parametrize("agent", ["opencode", "codex"])
async def test_acp_usage_is_what_the_agent_reported(
    agent: str, npm_agent: Callable[[NpmAgent], Path], model_server: ModelServer, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = BUILDERS[agent](npm_agent(PACKAGES[agent]), model_server, tmp_path / "home")
    config = structs.replace(config, **{"cwd": work})
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    manager = SessionManager(settings, AgentCatalog({agent: config}), SystemClock())
    try:
        sid = await manager.create_session(agent)
        await turn(manager, sid, "hello there")
        await manager.reconnect(sid)  # loading the session replays it: nothing may be counted again
        await turn(manager, sid, "and once more")
        calls = turn_calls(model_server)
        assert len(calls) == 2, [r.request.path for r in model_server.usage_reports()]
        usage = manager.view(sid).usage
        last = calls[-1]
        if agent == "opencode":
            assert usage.input_tokens == sum(c.prompt_tokens for c in calls)
            assert usage.output_tokens == sum(c.completion_tokens for c in calls)
            assert (usage.context_used, usage.context_size) == (last.prompt_tokens, 128_000)
            assert (usage.cost, usage.currency) == (0.0, "USD")
        else:
            assert (usage.input_tokens, usage.output_tokens, usage.cost) == (0, 0, None)
            assert usage.context_used == last.prompt_tokens + last.completion_tokens
            assert usage.context_size and usage.context_size > usage.context_used
        assert usage.reported and usage_summary(usage)
    finally:
        await manager.shutdown()
