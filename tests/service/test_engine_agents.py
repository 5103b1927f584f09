"""The agents an engine offers are its own machine's answer: a dashboard attached to it lists
what the engine found (the catalog and the engine's agents file), not what it would find itself."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from polypilot_tui.domain.agents import Availability
from polypilot_tui.engine import verbs
from polypilot_tui.service.remote import RemoteEngine
from tests.support.engine_service import running_engine

pytestmark = pytest.mark.slow


async def test_an_attached_client_sees_the_engines_catalog_with_what_each_agent_needs(tmp_path: Path) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(
        f'[gone]\nkind = "acp"\ncommand = "{tmp_path / "never-installed"}"\ninstall = "pipx install gone-agent"\n'
    )
    async with running_engine(env={"POLYPILOT_AGENTS_FILE": str(agents)}) as engine:
        mirror = RemoteEngine(lambda: asyncio.sleep(0, engine.socket), reconnect=False)
        await mirror.start()
        try:
            offers = {offer.name: offer for offer in await mirror.call(verbs.AGENTS, verbs.NoArgs())}
        finally:
            await mirror.detach(stop_engine=False)
    assert offers["demo"].availability is Availability.READY and offers["demo"].where == "built in"
    gone = offers["gone"]
    assert gone.availability is Availability.NOT_INSTALLED and gone.hint == "pipx install gone-agent"
    assert (
        gone.cannot_start
        == f"its command {tmp_path / 'never-installed'} is not found; install it with: pipx install gone-agent"
    )
    assert {"copilot", "opencode", "codex", "gemini", "claude", "goose", "qwen"} <= set(offers)  # the catalog, too
