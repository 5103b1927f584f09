"""Real ACP agents (opencode, codex-acp) from npm, run offline against the scripted model.

Recipes from reference/acp.md §4: every agent gets its own temporary HOME / XDG / CODEX_HOME,
so nothing of the machine's own configuration leaks in and nothing is written outside
tmp_path. opencode speaks Chat Completions and is configured through
OPENCODE_CONFIG_CONTENT with ``bash: ask``; codex-acp speaks only the Responses API and
reads ``$CODEX_HOME/config.toml`` (``approval_policy = "untrusted"``; it runs read-only
commands without asking, so the tests use a write command to force a permission prompt).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from polypilot_tui.agents.acp import AcpBackend
from polypilot_tui.agents.npm_cache import CODEX_ACP, OPENCODE, NpmAgent
from polypilot_tui.config import AgentConfig, Settings
from polypilot_tui.core.clock import SystemClock
from tests.agents.acp_support import Recorder
from tests.support.model_server import ModelServer

AGENTS = ("opencode", "codex")


def opencode_agent(binary: Path, server: ModelServer, home: Path) -> AgentConfig:
    """opencode acp with a Chat Completions provider pointing at the model server."""
    dirs = {name: home / name.lower() for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME",
                                                   "XDG_STATE_HOME")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    config = {
        "model": "mock/mock-model", "small_model": "mock/mock-model", "autoupdate": False, "share": "disabled",
        "permission": {"bash": "ask", "edit": "ask"},
        "provider": {"mock": {
            "npm": "@ai-sdk/openai-compatible", "name": "Mock",
            "options": {"baseURL": server.base_url, "apiKey": "dummy"},
            "models": {"mock-model": {"name": "Mock", "tool_call": True,
                                      "limit": {"context": 128000, "output": 4096}}},
        }},
    }
    env = {
        "HOME": str(home), **{k: str(v) for k, v in dirs.items()},
        "OPENCODE_CONFIG_CONTENT": json.dumps(config),
        "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
    }
    return AgentConfig(name="opencode", kind="acp", command=str(binary), args=["acp"], env=env)


def codex_agent(binary: Path, server: ModelServer, home: Path) -> AgentConfig:
    """codex-acp with a Responses-API provider pointing at the model server."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(f"""\
model = "mock-model"
model_provider = "mock"
approval_policy = "untrusted"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.mock]
name = "Mock"
base_url = "{server.base_url}"
wire_api = "responses"
env_key = "MOCK_API_KEY"
requires_openai_auth = false
supports_websockets = false

[analytics]
enabled = false
""")
    env = {"HOME": str(home), "CODEX_HOME": str(codex_home), "MOCK_API_KEY": "dummy", "RUST_LOG": "error"}
    return AgentConfig(name="codex", kind="acp", command=str(binary), env=env)


_PACKAGES: dict[str, NpmAgent] = {"opencode": OPENCODE, "codex": CODEX_ACP}
_BUILDERS = {"opencode": opencode_agent, "codex": codex_agent}


@pytest.fixture(params=AGENTS)
def agent_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def acp_agent(agent_name: str, npm_agent: Callable[[NpmAgent], Path], model_server: ModelServer,
              tmp_path: Path) -> AgentConfig:
    """The configured real agent (installed on first use; skipped without npm, failed on CI)."""
    binary = npm_agent(_PACKAGES[agent_name])
    return _BUILDERS[agent_name](binary, model_server, tmp_path / "home")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir(exist_ok=True)
    (folder / "README.md").write_text("readme text\n")
    return folder


@pytest.fixture
def make_backend(acp_agent: AgentConfig, workspace: Path, tmp_path: Path
                 ) -> Callable[..., tuple[AcpBackend, Recorder]]:
    """``make_backend("s1")`` → a fresh backend (own log folder) and its recorder."""

    def make(name: str = "s1", *, prefer_load: bool = False, grace: float = 10.0) -> tuple[AcpBackend, Recorder]:
        recorder = Recorder()
        settings = Settings(stop_grace_seconds=grace, state_dir=tmp_path / "state")
        backend = AcpBackend(acp_agent, recorder, SystemClock(), settings, tmp_path / name, cwd=workspace,
                             prefer_load=prefer_load)
        return backend, recorder

    return make
