"""Shared fixtures for the real-agent tests: pinned npm agents and the scripted model server.

Every test under tests/e2e is marked ``e2e``. An agent CLI is installed once per run from
npm (pinned, into .cache/npm). Without npm the tests are skipped with a clear message;
with ``CI=true`` they fail instead, so a CI machine can never pass by skipping them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from polypilot_tui.agents.npm_cache import COPILOT_CLI, NpmAgent, NpmUnavailable, ensure_installed
from tests.support.model_server import ModelServer


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.e2e)


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require_npm_agent(agent: NpmAgent) -> Path:
    """The agent's binary, installed if needed; skip (fail on CI) when npm is missing."""
    if not agent.installed() and shutil.which("npm") is None:
        message = f"npm is not on PATH, so {agent.package}@{agent.version} cannot be installed"
        if _in_ci():
            pytest.fail(f"{message} (CI=true: real-agent tests must run)")
        pytest.skip(message)
    try:
        return ensure_installed(agent)
    except NpmUnavailable as exc:
        pytest.fail(f"installing {agent.package}@{agent.version} failed: {exc}")


@pytest.fixture(scope="session")
def npm_agent() -> Callable[[NpmAgent], Path]:
    """``npm_agent(OPENCODE)`` → path of the pinned binary (installed once per run)."""
    cache: dict[NpmAgent, Path] = {}

    def get(agent: NpmAgent) -> Path:
        if agent not in cache:
            cache[agent] = require_npm_agent(agent)
        return cache[agent]

    return get


@pytest.fixture(scope="session")
def copilot_cli(npm_agent: Callable[[NpmAgent], Path]) -> Path:
    """The pinned Copilot CLI binary."""
    return npm_agent(COPILOT_CLI)


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """A scripted OpenAI-compatible model on 127.0.0.1, stopped when the test ends."""
    with ModelServer(slow_chunks=60, slow_interval=0.2) as server:
        yield server
