"""Real ACP agents (opencode, codex-acp) from npm, run offline against the scripted model.

The agent recipes live in tests/support/acp_agents.py (shared with tests/chaos). codex
runs read-only commands without asking, so the tests use a write command to force a
permission prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from polypilot_tui.agents.acp.backend import AcpBackend
from polypilot_tui.agents.npm_cache import NpmAgent
from polypilot_tui.config import AgentConfig, Settings
from polypilot_tui.domain.clock import SystemClock
from tests.agents.acp_support import Recorder
from tests.support.acp_agents import BUILDERS, PACKAGES
from tests.support.model_server import ModelServer

AGENTS = ("opencode", "codex")


@pytest.fixture(params=AGENTS)
def agent_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def acp_agent(
    agent_name: str, npm_agent: Callable[[NpmAgent], Path], model_server: ModelServer, tmp_path: Path
) -> AgentConfig:
    """The configured real agent (installed on first use; skipped without npm, failed on CI)."""
    binary = npm_agent(PACKAGES[agent_name])
    return BUILDERS[agent_name](binary, model_server, tmp_path / "home")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir(exist_ok=True)
    (folder / "README.md").write_text("readme text\n")
    return folder


@pytest.fixture
def make_backend(acp_agent: AgentConfig, workspace: Path, tmp_path: Path) -> Callable[..., tuple[AcpBackend, Recorder]]:
    """``make_backend("s1")`` → a fresh backend (own log folder) and its recorder."""

    def make(name: str = "s1", *, prefer_load: bool = False, grace: float = 10.0) -> tuple[AcpBackend, Recorder]:
        recorder = Recorder()
        settings = Settings.read(stop_grace_seconds=grace, state_dir=tmp_path / "state")
        backend = AcpBackend(
            acp_agent, recorder, SystemClock(), settings, tmp_path / name, cwd=workspace, prefer_load=prefer_load
        )
        return backend, recorder

    return make
