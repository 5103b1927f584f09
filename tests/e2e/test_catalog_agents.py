"""Installed agents work from the built-in catalog alone: no agents file, no polypilot config.

A user who has the Copilot CLI, opencode or codex-acp on PATH and has set the agent up the
agent's own way (the CLI's COPILOT_PROVIDER_* variables; opencode's OPENCODE_CONFIG_CONTENT;
codex's $CODEX_HOME/config.toml and OPENAI_API_KEY) runs ``polypilot agents`` and sees it ready,
then ``polypilot run --agent NAME`` does a tool turn against the scripted model server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from polypilot_tui.agents.npm_cache import CODEX_ACP, COPILOT_CLI, OPENCODE, NpmAgent
from tests.support.model_server import ModelServer
from tests.support.opencode_home import warm_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

POLYPILOT = [sys.executable, "-m", "polypilot_tui.cli"]
ROOT = Path(__file__).parents[2]
PACKAGES = {"copilot": COPILOT_CLI, "opencode": OPENCODE, "codex": CODEX_ACP}
#: The variables the developer's shell may hold that would change what an agent does.
FOREIGN = ("GH_TOKEN", "GITHUB_TOKEN", "COPILOT_GITHUB_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CODEX_HOME")


def agent_setup(name: str, binary: Path, server: ModelServer, home: Path) -> dict[str, str]:
    """The variables (and files under ``home``) a user would have set up for the agent itself."""
    if name == "copilot":
        return {
            "COPILOT_PROVIDER_BASE_URL": server.base_url,
            "COPILOT_PROVIDER_API_KEY": "sk-catalog-e2e-0123456789abcdef",
            "COPILOT_MODEL": "gpt-4.1",
            "COPILOT_HOME": str(home / ".copilot"),
        }
    if name == "opencode":
        model = {"name": "Mock", "tool_call": True, "limit": {"context": 128000, "output": 4096}}
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Mock",
            "options": {"baseURL": server.base_url, "apiKey": "dummy"},
            "models": {"mock-model": model},
        }
        config = {"model": "mock/mock-model", "small_model": "mock/mock-model", "autoupdate": False}
        config |= {"share": "disabled", "provider": {"mock": provider}}
        env = {
            "OPENCODE_CONFIG_CONTENT": json.dumps(config),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_SHARE": "1",
        }
        # A user who has run opencode before has its plugin SDK installed (opencode_home.py).
        warm_config(binary, home / ".config", env)
        return env
    codex_home = home / ".codex"  # codex's default place: no CODEX_HOME needed
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(
        'model = "mock-model"\nmodel_provider = "mock"\napproval_policy = "untrusted"\n'
        'sandbox_mode = "danger-full-access"\ncheck_for_update_on_startup = false\n'
        "[model_providers.mock]\n"
        f'name = "Mock"\nbase_url = "{server.base_url}"\nwire_api = "responses"\n'
        'env_key = "OPENAI_API_KEY"\nrequires_openai_auth = false\nsupports_websockets = false\n'
        "[analytics]\nenabled = false\n"
    )
    return {"OPENAI_API_KEY": "dummy", "RUST_LOG": "error"}


@pytest.fixture
def user_env(tmp_path: Path) -> Callable[[str, Path, dict[str, str]], dict[str, str]]:
    """A user's environment: HOME and XDG folders of their own, the agent's command on PATH
    (as npm -g leaves it), no polypilot agents file or config."""

    def make(command: str, binary: Path, extra: dict[str, str]) -> dict[str, str]:
        home = tmp_path / "home"
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / command).symlink_to(binary)
        env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_") and k not in FOREIGN}
        env |= {
            "HOME": str(home),
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "POLYPILOT_STATE_DIR": str(tmp_path / "state"),
            "POLYPILOT_NPM_CACHE": str(tmp_path / "no-npm-cache"),  # found on PATH, not in our cache
            "PYTHONUNBUFFERED": "1",
        }
        return env | extra

    return make


def polypilot(env: dict[str, str], *args: str, cwd: Path, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*POLYPILOT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("name", list(PACKAGES))
def test_an_installed_agent_runs_from_the_catalog_alone(
    name: str,
    npm_agent: Callable[[NpmAgent], Path],
    model_server: ModelServer,
    user_env: Callable[[str, Path, dict[str, str]], dict[str, str]],
    tmp_path: Path,
) -> None:
    binary = npm_agent(PACKAGES[name])
    (tmp_path / "home").mkdir()
    env = user_env(Path(PACKAGES[name].binary).name, binary, agent_setup(name, binary, model_server, tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "README.md").write_text("catalog readme\n")
    listed = polypilot(env, "agents", "--json", cwd=work)
    assert listed.returncode == 0, listed.stderr
    offers = {offer["name"]: offer for offer in json.loads(listed.stdout)}
    assert offers[name]["availability"] == "ready", offers[name]
    assert offers[name]["where"] == str(tmp_path / "bin" / Path(PACKAGES[name].binary).name)
    assert not (tmp_path / "home" / ".config" / "polypilot").exists()  # nothing to write first
    done = polypilot(env, "run", "--agent", name, "--allow-tools", "please TOOL CMD=`echo from-the-catalog`", cwd=work)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    assert "done: " in done.stdout and "from-the-catalog" in done.stdout.split("done: ", 1)[1]  # the tool's output
    assert any(request.is_model_call for request in model_server.requests)
