"""Orchestrators on real agents call polypilot's team tools, handed as an MCP server.

The engine is served on its socket in this process; its agents are the real Copilot CLI (SDK
path) and opencode (ACP) against the scripted model, whose ``STEPS=`` prompt makes the
orchestrator call the relay's tools one by one: start two workers on two other agents, wait
for them (the engine's own turn ends), read their replies, and answer with them.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from msgspec import structs

from polypilot_tui.agents.base import ALLOW_ONCE
from polypilot_tui.agents.npm_cache import OPENCODE, NpmAgent
from polypilot_tui.config import AgentCatalog, AgentConfig, PermissionPolicy, Settings, WatchdogSettings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.team import TeamBounds
from polypilot_tui.domain.turn import Outcome
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.verbs import ORCHESTRATE, Orchestrate
from tests.support.acp_agents import opencode_agent
from tests.support.copilot_e2e import KEY, KEY_ENV, copilot_agent
from tests.support.engine_service import serving_in_process
from tests.support.model_server import ModelServer
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

WAIT = 120.0


@dataclass
class Team:
    engine: LocalEngine
    server: ModelServer
    root: Path


def files_holding(root: Path, secret: str) -> list[Path]:
    """Every file under ``root`` whose bytes hold ``secret``."""
    needle = secret.encode()
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]


@pytest.fixture
async def team(
    request: pytest.FixtureRequest,
    copilot_cli: Path,
    npm_agent: Callable[[NpmAgent], Path],
    model_server: ModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Team]:
    """An engine served on its socket with the demo agent, Copilot and opencode on the scripted model.
    The permission policy is the default, ask: the test answers each prompt as the human would;
    an indirect parameter overrides settings. ``copilot-acp`` is the same CLI in its ``--acp``
    mode, which ignores the ``mcpServers`` it is handed."""
    monkeypatch.setenv(KEY_ENV, KEY)
    work = tmp_path / "work"
    agents = {
        "demo": AgentConfig(name="demo", kind="demo", cwd=work),
        "copilot": structs.replace(
            copilot_agent(copilot_cli, model_server, tmp_path / "copilot-home", work), name="copilot"
        ),
        "opencode": structs.replace(
            opencode_agent(npm_agent(OPENCODE), model_server, tmp_path / "opencode-home"), cwd=work
        ),
        "copilot-acp": AgentConfig(
            name="copilot-acp",
            kind="acp",
            command=str(copilot_cli),
            args=["--acp"],
            cwd=work,
            env={
                "COPILOT_HOME": str(tmp_path / "copilot-acp-home"),
                "COPILOT_OFFLINE": "true",
                "COPILOT_PROVIDER_BASE_URL": model_server.base_url,
                "COPILOT_PROVIDER_TYPE": "openai",
                "COPILOT_MODEL": "gpt-4.1",
                "COPILOT_PROVIDER_API_KEY": KEY,
            },
        ),
    }
    overrides = dict(getattr(request, "param", {}))
    settings = Settings.read(
        None,
        state_dir=tmp_path / "state",
        record=True,  # as by default: no recording may hold the capability either
        demo_speed=50,
        permission_policy=PermissionPolicy.ASK,
        team_tools_seconds=overrides.pop("team_tools_seconds", 60),
        watchdog=WatchdogSettings(**overrides),
    )
    engine = build_engine(settings, AgentCatalog(agents))  # saved as `serve` saves: registry, history, recordings
    await engine.start()
    async with serving_in_process(engine):
        try:
            yield Team(engine, model_server, tmp_path)
        finally:
            await engine.close()


Plan = list[dict[str, object]]


def steps(*workers: tuple[str, str]) -> Plan:
    """The orchestrator's plan: start each (agent, prompt), wait for all, read each reply."""
    plan: Plan = [{"tool": "start_worker", "args": {"agent": a, "prompt": p}} for a, p in workers]
    plan.append({"tool": "wait_workers", "args": {"timeout_seconds": WAIT}})
    plan += [{"tool": "read_reply", "args": {"worker": ref(i)}} for i in range(len(workers))]
    return plan


def ref(step: int) -> str:
    """The worker id in step ``step``'s result (the scripted model fills it in)."""
    return "{{" + f"{step}.worker" + "}}"


def prompt_of(plan: Plan) -> str:
    return "Lead the team. STEPS=" + json.dumps(plan)


PAIR = TeamBounds(workers_at_once=2, total_workers=2)


async def orchestrator(team: Team, agent: str, bounds: TeamBounds = PAIR) -> str:
    """A session on ``agent`` made an orchestrator: its agent reconnected, handed the relay."""
    engine, manager = team.engine, team.engine.manager
    lead = await manager.create_session(agent, "lead")
    await engine.call(ORCHESTRATE, Orchestrate(lead, bounds))
    session = manager.session(lead)

    def reconnected() -> bool:  # handed the relay at this connect (opencode lists it at once)
        said = any("Session reconnected" in item.text for item in manager.history(lead))
        return said and session.connected and not session.connecting

    await until(reconnected, 60, f"{agent} reconnected with the relay")
    return lead


async def answer_until_over(manager: SessionManager, lead: str, timeout: float) -> list[str]:
    """Allow once each permission the orchestrator asks, as the human would by key, until its turn
    ends; the titles asked. Only the lead asks: a worker that asks fails the test."""
    asked: list[str] = []
    session = manager.session(lead)
    deadline = time.monotonic() + timeout
    while not (session.turn is None and session.turns):
        assert time.monotonic() < deadline, f"the turn of {lead} did not end within {timeout:g} s (asked {asked})"
        for sid in manager.ids():
            turn = manager.session(sid).turn
            for request_id, prompt in list(turn.pending_permissions.items()) if turn is not None else ():
                assert sid == lead and prompt.kind == "mcp", (sid, prompt)
                asked.append(prompt.title)
                await manager.answer_permission(lead, request_id, ALLOW_ONCE)
        await asyncio.sleep(0.05)
    return asked


async def run_team(team: Team, agent: str, workers: tuple[tuple[str, str], ...]) -> str:
    """The orchestrator's turn, sent and ended by the engine; its reply."""
    return await run_plan(team, agent, steps(*workers))


async def run_plan(team: Team, agent: str, plan: Plan, bounds: TeamBounds | None = None) -> str:
    """An orchestrator on ``agent`` playing ``plan``, its turn sent and ended by the engine; its reply."""
    manager = team.engine.manager
    lead = await orchestrator(team, agent, *((bounds,) if bounds else ()))
    ((_, capability),) = team.engine.teams.tool_servers(lead)[0].env
    prompt = prompt_of(plan)
    await manager.send(lead, prompt)
    sent = time.monotonic()
    await until(lambda: not manager.awaiting_tools(lead), 60, f"{agent} listing the team tools")
    print(f"{agent}: the team tools arrived {time.monotonic() - sent:.1f} s after the turn was sent")
    session = manager.session(lead)
    asked = await answer_until_over(manager, lead, WAIT + 60)
    # Each call of a team tool is the human's to allow (Copilot asks; opencode's own policy lets MCP tools run).
    assert asked == ([] if agent == "opencode" else [step["tool"] for step in plan])
    record = session.turns[-1]
    assert record.outcome is Outcome.COMPLETED, (record.outcome, record.reason)
    replies = [item.text for item in manager.history(lead) if item.kind is ItemKind.ASSISTANT]
    assert replies, [(i.kind, i.text[:200]) for i in manager.history(lead)]
    assert (manager.workdir(lead) / "relay.log").is_file()
    await team.engine.close()  # every file written and closed: then none holds the capability
    assert files_holding(team.root, capability) == []
    return replies[-1]


async def test_a_copilot_orchestrator_runs_a_demo_and_an_opencode_worker(team: Team) -> None:
    began = time.monotonic()
    reply = await run_team(team, "copilot", (("demo", "alpha job"), ("opencode", "beta job")))
    assert "You said: **alpha job**" in reply, reply
    assert "echo: beta job" in reply, reply
    assert reply.count("its last turn: completed") == 2, reply
    workers = [v for v in team.engine.manager.views() if v.parent]
    assert sorted(v.agent for v in workers) == ["demo", "opencode"]
    print(f"copilot orchestrator: {time.monotonic() - began:.1f} s")


async def test_an_opencode_orchestrator_runs_a_demo_and_a_copilot_worker(team: Team) -> None:
    began = time.monotonic()
    reply = await run_team(team, "opencode", (("demo", "gamma job"), ("copilot", "delta job")))
    assert "You said: **gamma job**" in reply, reply
    assert "echo: delta job" in reply, reply
    assert reply.count("its last turn: completed") == 2, reply
    print(f"opencode orchestrator: {time.monotonic() - began:.1f} s")


#: The chaos matrix's inactivity tier for real agents on the scripted model (tests/chaos/drivers.py
#: MODEL_TIERS): the worker's silence is the model's, so a longer tier only makes the test wait.
HANG_TIER = 5.0


@pytest.mark.parametrize("team", [{"inactivity": HANG_TIER}], indirect=True)
async def test_a_hanging_worker_ends_at_its_watchdog_tier_and_the_wait_returns_that_end(team: Team) -> None:
    """The model never answers the worker: its turn ends at the inactivity tier (5 s here), and
    the orchestrator's wait returns that end, the engine's own, with its reason."""
    began = time.monotonic()
    reply = await run_team(team, "copilot", (("opencode", "HANG forever"),))
    states = json.loads(reply.splitlines()[1])
    assert [(s["state"], s["outcome"]) for s in states] == [("failed", "stuck")], reply
    assert f"no activity for {HANG_TIER:g} s" in states[0]["reason"], reply
    assert f"its last turn: stuck (no activity for {HANG_TIER:g} s" in reply, reply
    print(f"hanging worker: {time.monotonic() - began:.1f} s")


@pytest.mark.parametrize("team", [{"team_tools_seconds": 5.0}], indirect=True)
async def test_an_agent_that_ignores_the_tools_is_told_in_its_session_by_name(team: Team) -> None:
    """``copilot --acp`` ignores ACP ``mcpServers`` (the CLI's #1040, #1255): its model is offered
    no team tool, and the session says, naming the agent, that its tools did not arrive."""
    began = time.monotonic()
    manager = team.engine.manager
    lead = await orchestrator(team, "copilot-acp")
    await manager.send(lead, prompt_of(steps(("demo", "never started"))))
    assert await answer_until_over(manager, lead, 60) == []
    replies = [i.text for i in manager.history(lead) if i.kind is ItemKind.ASSISTANT]
    assert replies and "no tool named like 'start_worker' was offered" in replies[-1], replies
    said = "The team tools did not reach copilot-acp within 5 s: this session cannot start or reach workers"
    await until(lambda: any(said in i.text for i in manager.history(lead) if i.kind is ItemKind.ERROR), 30, said)
    assert manager.awaiting_tools(lead)
    assert [v for v in manager.views() if v.parent] == [], "no worker was started"
    print(f"tools that never arrived: {time.monotonic() - began:.1f} s")


async def test_a_worker_relay_cannot_act_for_its_orchestrator(team: Team) -> None:
    """At depth 2 an opencode worker gets a relay of its own; told to stop and read its
    orchestrator's other worker, its tools are refused in the engine's words."""
    began = time.monotonic()
    overreach = [
        {"tool": "stop_worker", "args": {"worker": ref(0)}},
        {"tool": "read_reply", "args": {"worker": ref(0)}},
    ]
    plan: Plan = [
        {"tool": "start_worker", "args": {"agent": "demo", "prompt": "bystander job"}},
        {"tool": "start_worker", "args": {"agent": "opencode", "prompt": "Overreach. STEPS=" + json.dumps(overreach)}},
        {"tool": "wait_workers", "args": {"timeout_seconds": WAIT}},
        {"tool": "read_reply", "args": {"worker": ref(1)}},
        {"tool": "read_reply", "args": {"worker": ref(0)}},
    ]
    reply = await run_plan(team, "copilot", plan, TeamBounds(workers_at_once=2, total_workers=2, depth=2))
    workers = {v.agent: v for v in team.engine.manager.views() if v.parent}
    bystander = workers["demo"].id
    assert reply.count(f"no worker '{bystander}' of yours") == 2, reply
    assert "You said: **bystander job**" in reply and "its last turn: completed (" in reply, "not stopped"
    print(f"worker relay refused: {time.monotonic() - began:.1f} s")
