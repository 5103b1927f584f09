"""The agents an engine offers are its own machine's answer: a dashboard attached to it lists
what the engine found (the catalog and the engine's agents file), not what it would find itself."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from polypilot_tui.domain.agents import Availability
from polypilot_tui.engine import verbs
from polypilot_tui.service.remote import RemoteEngine
from tests.support.engine_service import engine_env, running_engine

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


async def test_an_agent_added_after_the_engine_started_is_said_to_need_a_restart(tmp_path: Path) -> None:
    """The engine reads the agents file when it starts: `polypilot agents` (which reads it now)
    lists a new entry as ready, so the engine's "no agent named" must say why it lacks it."""
    config = tmp_path / "config"
    config.mkdir(mode=0o700)
    env = {"POLYPILOT_CONFIG_DIR": str(config)}
    async with running_engine(env=env) as engine:
        typo = await asyncio.to_thread(new_session, engine.state, env, "mien")
        assert typo.returncode != 0 and "no agent named 'mien'" in typo.stderr, typo.stderr
        assert "changed" not in typo.stderr  # nothing changed: no advice to restart
        (config / "agents.toml").write_text('[mine]\nkind = "acp"\ncommand = "/bin/true"\n')
        done = await asyncio.to_thread(new_session, engine.state, env, "mine")
    assert done.returncode != 0, done.stdout
    assert "no agent named 'mine'" in done.stderr, done.stderr
    assert f"{config / 'agents.toml'} has changed since the engine read it" in done.stderr, done.stderr
    assert "polypilot engine stop" in done.stderr, done.stderr


def new_session(state: Path, env: dict[str, str], agent: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polypilot_tui", "new", "--agent", agent],
        env=engine_env(state, env),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
