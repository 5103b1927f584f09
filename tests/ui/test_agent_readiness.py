"""Agents that cannot start here are said to be so before anyone types a prompt to them.

The real backends are used (no injected factory), with the scripted ACP agent: the check is
the one ``polypilot agents`` prints — the command found, the provider key variable set.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest
from textual.widgets import OptionList

from polypilot_tui.agents.readiness import readiness
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.agents import Availability
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.view import SessionStatus
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import attach_persistence
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.screens.new_session import NewSessionScreen
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.ui.helpers import engine_of, on_engine, wait_for

FAKE_AGENT = Path(__file__).parents[1] / "support" / "fake_acp_agent.py"
UNSET_KEY = "POLYPILOT_TEST_KEY_NOBODY_SETS"


def install_agent(path: Path) -> None:
    """The scripted ACP agent behind a command of its own, as an npm install would leave it."""
    path.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_AGENT} "$@"\n')
    path.chmod(0o755)


def app_for(tmp_path: Path) -> PolypilotApp:
    agents = tmp_path / "agents.toml"
    agents.write_text(f"""
[fake]
kind = "acp"
command = "{tmp_path / "fake-agent"}"

[gone]
kind = "acp"
command = "{tmp_path / "never-installed"}"

[keyless]
kind = "copilot"
provider = {{ type = "openai", base_url = "http://127.0.0.1:9/v1", api_key_env = "{UNSET_KEY}" }}
""")
    settings = Settings.read(
        None,
        state_dir=tmp_path / "state",
        record=False,
        agents_file=agents,
    )
    catalog = load_agents(agents)
    ids = itertools.count(1)
    manager = SessionManager(settings, catalog, SystemClock(), id_factory=lambda: f"s{next(ids)}")
    return on_engine(
        settings,
        catalog,
        LocalEngine(manager, attach_persistence),
        theme_dirs=[BUNDLED_DIR],
        keymap_file=tmp_path / "no-keymap.toml",
    )


def test_readiness_names_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UNSET_KEY, raising=False)
    catalog = load_agents(None)
    assert readiness(catalog.agents["demo"]).ready
    app = app_for(tmp_path)
    agents = app.catalog.agents
    gone = readiness(agents["gone"])
    assert (gone.availability, gone.problem) == (
        Availability.NOT_INSTALLED,
        f"its command {tmp_path / 'never-installed'} is not found",
    )
    keyless = readiness(agents["keyless"])
    assert keyless.availability in (Availability.NO_KEY, Availability.NOT_INSTALLED)  # the CLI may be absent
    if keyless.availability is Availability.NO_KEY:
        assert UNSET_KEY in (keyless.problem or "")
    monkeypatch.setenv(UNSET_KEY, "set")
    assert readiness(agents["keyless"]).availability is not Availability.NO_KEY


async def test_the_picker_greys_out_agents_that_cannot_start_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(UNSET_KEY, raising=False)
    install_agent(tmp_path / "fake-agent")
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen), what="the agent picker")
        options = app.screen.query_one(OptionList)
        shown = {options.get_option_at_index(i).id: options.get_option_at_index(i) for i in range(options.option_count)}
        assert list(shown) == ["demo", "fake", "keyless", "gone"]  # every agent, those that can start first
        assert not shown["demo"].disabled and not shown["fake"].disabled
        assert shown["gone"].disabled and "never-installed is not found" in str(shown["gone"].prompt)
        assert shown["keyless"].disabled
        visited = []
        for _ in range(4):
            await pilot.press("down")
            visited.append(options.highlighted_option.id if options.highlighted_option else None)
        assert set(visited) <= {"demo", "fake"}, visited  # the cursor skips what cannot start
        while options.highlighted_option is None or options.highlighted_option.id != "fake":
            await pilot.press("down")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(engine_of(app).manager.ids()) == 2, what="the session on the fake agent")
        assert engine_of(app).manager.view(engine_of(app).manager.ids()[-1]).agent == "fake"


async def test_a_restored_session_whose_agent_is_gone_says_so_and_reconnect_tries_again(tmp_path: Path) -> None:
    command = tmp_path / "fake-agent"
    install_agent(command)
    app = app_for(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        sid = await engine_of(app).manager.create_session("fake")
        await wait_for(
            pilot,
            lambda: engine_of(app).manager.view(sid).status is SessionStatus.IDLE,
            timeout=30,
            what="the agent started",
        )
    command.unlink()  # uninstalled while the app was closed

    again = app_for(tmp_path)
    async with again.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: sid in engine_of(again).manager.ids(), what="the session restored")
        view = engine_of(again).manager.view(sid)
        # Not "Idle" until the first prompt fails: the reason is there from the start.
        assert view.status is SessionStatus.DISCONNECTED
        assert f"agent 'fake' cannot start here: its command {command} is not found" in view.reason
        install_agent(command)
        again.select(sid)
        await pilot.press("ctrl+r")
        await wait_for(
            pilot,
            lambda: engine_of(again).manager.view(sid).status is SessionStatus.IDLE,
            timeout=30,
            what="the reinstalled agent connected",
        )
