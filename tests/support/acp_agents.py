"""Real ACP agents (opencode, codex-acp) configured for the scripted model server, offline.

Recipes from reference/acp.md §4: every agent gets its own temporary HOME / XDG / CODEX_HOME,
so nothing of the machine's own configuration leaks in and nothing is written outside the
given home. opencode speaks Chat Completions and is configured through
OPENCODE_CONFIG_CONTENT with ``bash: ask``; its home starts with its plugin SDK installed, as
after a first start (tests/support/opencode_home.py). codex-acp speaks only the Responses API
and reads ``$CODEX_HOME/config.toml`` (``approval_policy = "untrusted"``).

Shared by tests/e2e/acp and tests/chaos.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from polypilot_tui.agents.npm_cache import CODEX_ACP, OPENCODE, NpmAgent, NpmUnavailable, ensure_installed
from polypilot_tui.config import AgentConfig
from tests.support.model_server import ModelServer
from tests.support.opencode_home import warm_config


def opencode_agent(binary: Path, server: ModelServer, home: Path) -> AgentConfig:
    """opencode acp with a Chat Completions provider pointing at the model server."""
    dirs = {
        name: home / name.lower() for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    config = {
        "model": "mock/mock-model",
        "small_model": "mock/mock-model",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"bash": "ask", "edit": "ask"},
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": server.base_url, "apiKey": "dummy"},
                "models": {
                    "mock-model": {"name": "Mock", "tool_call": True, "limit": {"context": 128000, "output": 4096}}
                },
            }
        },
    }
    env = {
        "HOME": str(home),
        **{k: str(v) for k, v in dirs.items()},
        "OPENCODE_CONFIG_CONTENT": json.dumps(config),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
    }
    # Its plugin SDK already installed, as after a first start (tests/support/opencode_home.py).
    warm_config(binary, dirs["XDG_CONFIG_HOME"], env)
    return AgentConfig(name="opencode", kind="acp", command=str(binary), args=["acp"], env=env)


def codex_agent(binary: Path, server: ModelServer, home: Path, *, retries: bool = True) -> AgentConfig:
    """codex-acp with a Responses-API provider pointing at the model server (``retries=False``:
    a failed model call is reported at once, not retried with backoff)."""
    no_retries = "request_max_retries = 0\nstream_max_retries = 0\n" if not retries else ""
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
{no_retries}
[analytics]
enabled = false
""")
    env = {"HOME": str(home), "CODEX_HOME": str(codex_home), "MOCK_API_KEY": "dummy", "RUST_LOG": "error"}
    return AgentConfig(name="codex", kind="acp", command=str(binary), env=env)


PACKAGES: dict[str, NpmAgent] = {"opencode": OPENCODE, "codex": CODEX_ACP}
BUILDERS = {"opencode": opencode_agent, "codex": codex_agent}


def require_binary(agent: NpmAgent) -> Path:
    """The pinned binary, installed if needed; skip without npm (fail when ``CI=true``)."""
    if not agent.installed() and shutil.which("npm") is None:
        message = f"npm is not on PATH, so {agent.package}@{agent.version} cannot be installed"
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail(f"{message} (CI=true: real-agent tests must run)")
        pytest.skip(message)
    try:
        return ensure_installed(agent)
    except NpmUnavailable as exc:
        pytest.fail(f"installing {agent.package}@{agent.version} failed: {exc}")
