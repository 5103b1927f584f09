"""``polypilot team SESSION``: make a session an orchestrator with a budget, show its team as
JSON (``--show``), or stop every worker of it (``--stop-workers``)."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from polypilot_tui.commands.live import find_view, run_command
from polypilot_tui.commands.output import say
from polypilot_tui.config import Settings
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.team import TeamBounds
from polypilot_tui.domain.text import one_line
from polypilot_tui.engine import verbs
from polypilot_tui.service.client import EngineClient

EXIT_OK = 0


def bounds_given(
    workers_at_once: int | None = None,
    total: int | None = None,
    depth: int | None = None,
    turns: int | None = None,
    minutes: float | None = None,
    tokens: int | None = None,
    cost: float | None = None,
) -> dict[str, Any]:
    """The bounds given on the command line, by :class:`TeamBounds` field (the engine checks them)."""
    given = {
        "workers_at_once": workers_at_once,
        "total_workers": total,
        "depth": depth,
        "turns": turns,
        "wall_seconds": minutes * 60 if minutes is not None else None,
        "tokens": tokens,
        "cost": cost,
    }
    return {k: v for k, v in given.items() if v is not None}


def state_json(state: verbs.TeamState) -> str:
    return dump_json(asdict(state), indent=2, ascii_only=True)


async def cmd_team(settings: Settings, key: str, given: dict[str, Any], show: bool, stop_workers: bool) -> int:
    """Orchestrate (printing the team as JSON), show it, or stop its workers. A session that
    leads a team keeps the bounds not ``given`` (a re-run never loosens what was not named)."""

    async def body(client: EngineClient) -> int:
        view = await find_view(client, key)
        ref = verbs.SessionRef(view.id)
        if stop_workers:
            stopped = await client.call(verbs.STOP_WORKERS, ref)
            say(f"{one_line(view.name, 60)}: {stopped} worker(s) stopped")
        elif show:
            say(state_json(await client.call(verbs.TEAM_STATE, ref)))
        else:
            base = (await client.call(verbs.TEAM_STATE, ref)).bounds if view.orchestrator else TeamBounds()
            bounds = replace(base, **given)
            say(state_json(await client.call(verbs.ORCHESTRATE, verbs.Orchestrate(view.id, bounds))))
        return EXIT_OK

    return await run_command(settings, not show, body)
