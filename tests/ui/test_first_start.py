"""The first screen of a first start: the demo session says it is the demo (scripted, no model),
and names the agents found ready on this machine with the key that starts one (it said nothing
of them, and looked like the real thing). Real executables on a PATH of the test's own."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from textual.widgets import Static

from polypilot_tui.agents import locate as locate_module
from polypilot_tui.agents.catalog import builtin_tables
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.ui.helpers import on_engine, session_added, wait_for


def chat_says(app: PolypilotApp) -> str:
    """What the empty chat on screen says, in one line."""
    shown = [str(w.render()) for w in app.query(".chat-empty").results(Static) if w.display and w.is_on_screen]
    return " ".join(" ".join(shown).split())


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No agent installed: a PATH of one empty folder, a HOME of the test's own, no npm cache."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(locate_module, "USER_BIN_DIRS", ())
    monkeypatch.setattr(locate_module, "PINNED", {})
    return bin_dir


def install(bin_dir: Path, command: str) -> None:
    path = bin_dir / command
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)


def first_start_app(tmp_path: Path, agents: Path | None = None) -> PolypilotApp:
    """The dashboard as on a first start: nothing saved, the built-in catalog, the demo first."""
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    catalog = load_agents(agents, builtin_tables())
    ids = itertools.count(1)
    manager = SessionManager(settings, catalog, SystemClock(), id_factory=lambda: f"s{next(ids)}")
    return on_engine(
        settings,
        catalog,
        LocalEngine(manager),
        theme_dirs=[BUNDLED_DIR],
        keymap_file=tmp_path / "no-keymap.toml",
        launch_folder=str(tmp_path),
    )


async def test_the_demo_says_what_it_is_and_names_the_agents_found_ready(
    machine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(machine, "codex-acp")
    install(machine, "gemini")  # installed, no sign-in found
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-0000")  # codex's sign-in
    app = first_start_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: "Agents ready on this machine" in chat_says(app), what="the agents found")
        text = chat_says(app)
        assert "This is the built-in demo agent: scripted replies, no model" in text
        assert "Agents ready on this machine: codex (OpenAI Codex (codex-acp))." in text
        assert "Press ctrl+n to start a session with one of them." in text
        assert "Installed, but no sign-in found: gemini" in text
        assert "copilot" not in text  # not installed: not offered


async def test_with_no_agent_ready_it_says_so_and_where_to_look(machine: Path, tmp_path: Path) -> None:
    app = first_start_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: "No agent is ready" in chat_says(app), what="the look at this machine")
        text = chat_says(app)
        assert "This is the built-in demo agent" in text and "`polypilot agents`" in text and "ctrl+n" in text


async def test_a_real_agents_session_shows_no_demo_text(machine: Path, tmp_path: Path) -> None:
    install(machine, "my-agent")
    agents = tmp_path / "agents.toml"
    agents.write_text('[mine]\nkind = "acp"\ncommand = "my-agent"\n')
    app = first_start_app(tmp_path, agents)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.dashboard.agents_found.offers is not None, what="the agents found")
        sid = await session_added(pilot, "demo")
        app.select(sid)
        await wait_for(pilot, lambda: "built-in demo agent" in chat_says(app))
        other = await session_added(pilot, "mine", connect=False)
        app.select(other)
        await wait_for(pilot, lambda: chat_says(app) == "No messages yet. Type a prompt below.", what="its chat")
