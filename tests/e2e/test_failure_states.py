"""Named failure states from real agents: the scripted model server answers 401, 429, 404
(unknown model) or has its port closed, and the engine's view names the failure.

The Copilot CLI and codex-acp run through the SessionManager (default backend factory).
Both retry a 429 with backoff unless told not to: the 429 carries ``x-should-retry: false``
(Copilot then reports at once) and codex gets ``request_max_retries = 0``. Without them a
429 costs about a minute per agent (opencode retries a 429 and a closed port for over a
minute whatever the answer says, so it gets only the 401 and the unknown model). Agents
that cannot start are real processes too: a command that is not there, and one that dies
during its start with a word on stderr.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from msgspec import structs

from polypilot_tui.agents.catalog import builtin_tables
from polypilot_tui.agents.npm_cache import CODEX_ACP, OPENCODE, NpmAgent
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.failures import FailureKind
from polypilot_tui.domain.view import SessionStatus
from polypilot_tui.engine.manager import SessionManager
from tests.support.acp_agents import codex_agent, opencode_agent
from tests.support.copilot_harness import AGENT, catalog_entry, texts
from tests.support.model_server import ModelServer
from tests.support.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: What an OpenAI-compatible server answers for each fault (OpenAI's own bodies).
FAULTS: dict[str, tuple[int, Any, dict[str, str]] | None] = {
    "401": (
        401,
        {
            "error": {
                "message": "Incorrect API key provided.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        },
        {},
    ),
    "429": (
        429,
        {"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}},
        {"x-should-retry": "false", "retry-after-ms": "1"},
    ),
    "unknown-model": (
        404,
        {
            "error": {
                "message": "The model `gpt-4.1` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "code": "model_not_found",
            }
        },
        {},
    ),
    "down": None,
}
KINDS = {
    "401": FailureKind.NEEDS_SIGN_IN,
    "429": FailureKind.RATE_LIMITED,
    "unknown-model": FailureKind.MODEL_UNAVAILABLE,
    "down": FailureKind.SERVER_UNREACHABLE,
}


def manager_for(config: AgentConfig, root: Path) -> SessionManager:
    settings = Settings.read(None, state_dir=root / "state", record=False)
    return SessionManager(settings, AgentCatalog({config.name: config}), SystemClock())


def break_server(server: ModelServer, fault: str) -> None:
    spec = FAULTS[fault]
    if spec is None:
        server.stop()  # the port is closed: nothing listens there any more
    else:
        server.fault = spec


async def failed_turn(manager: SessionManager, agent: str, timeout: float) -> str:
    """A session on ``agent`` whose first prompt has ended; its id."""
    sid = await manager.create_session(agent)
    await manager.send(sid, "hello")
    session = manager.session(sid)
    await until(lambda: session.turn is None and bool(session.turns), timeout, "the turn to end")
    return sid


def assert_named(manager: SessionManager, sid: str, fault: str) -> None:
    view = manager.view(sid)
    assert view.status is SessionStatus.ERROR, view
    assert view.failure is not None, view.reason
    assert view.failure.kind is KINDS[fault], view.reason
    assert view.failure.detail == view.reason
    # The chat's error row says the title, the agent's words and the fix.
    [row] = texts(manager, sid, ItemKind.ERROR)
    assert row.startswith(f"{view.failure.title.capitalize()} — {view.reason}\nFix: {view.failure.fix}")


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_copilot_failures_are_named(
    fault: str, copilot_cli: Path, model_server: ModelServer, tmp_path: Path
) -> None:
    sign_in = str(builtin_tables()["copilot"]["sign_in"])  # as the catalog's copilot has it
    manager = manager_for(
        structs.replace(catalog_entry(copilot_cli, model_server, tmp_path), **{"sign_in": sign_in}), tmp_path
    )
    break_server(model_server, fault)
    try:
        sid = await failed_turn(manager, AGENT, 60)
        assert_named(manager, sid, fault)
        assert manager.session(sid).turns[-1].detail == ("" if fault == "down" else f"HTTP {FAULTS[fault][0]}")  # type: ignore[index]
        if fault == "401":
            assert manager.view(sid).failure.fix == sign_in  # type: ignore[union-attr]
    finally:
        await manager.shutdown()


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_codex_failures_are_named(
    fault: str, npm_agent: Callable[[NpmAgent], Path], model_server: ModelServer, tmp_path: Path
) -> None:
    config = codex_agent(npm_agent(CODEX_ACP), model_server, tmp_path / "home", retries=False)
    config = structs.replace(config, **{"sign_in": builtin_tables()["codex"]["sign_in"]})
    manager = manager_for(config, tmp_path)
    break_server(model_server, fault)
    try:
        sid = await failed_turn(manager, config.name, 60)
        assert_named(manager, sid, fault)
        if fault == "401":
            assert "codex login" in manager.view(sid).failure.fix  # type: ignore[union-attr]
    finally:
        await manager.shutdown()


@pytest.mark.parametrize("fault", ["401", "unknown-model"])
async def test_opencode_failures_are_named_from_its_words_alone(
    fault: str, npm_agent: Callable[[NpmAgent], Path], model_server: ModelServer, tmp_path: Path
) -> None:
    """opencode says no status code: its words name the failure (it retries a 429 or a closed
    port for over a minute, so those two are left to Copilot and codex)."""
    config = opencode_agent(npm_agent(OPENCODE), model_server, tmp_path / "home")
    manager = manager_for(config, tmp_path)
    break_server(model_server, fault)
    try:
        sid = await failed_turn(manager, config.name, 60)
        assert_named(manager, sid, fault)
        assert manager.session(sid).turns[-1].detail == ""  # no code: the words did it
    finally:
        await manager.shutdown()


@pytest.mark.parametrize("kind", ["copilot", "acp"])
async def test_an_agent_that_is_not_there_or_dies_at_start_is_named(kind: str, tmp_path: Path) -> None:
    dies = tmp_path / "dies.sh"
    dies.write_text("#!/bin/sh\necho 'Error: config file /nope/settings.json is malformed' >&2\nexit 3\n")
    dies.chmod(dies.stat().st_mode | stat.S_IXUSR)
    cases = {"missing": str(tmp_path / "no-such-agent"), "dies": str(dies)}
    expected = {"missing": FailureKind.NOT_INSTALLED, "dies": FailureKind.EXITED_AT_START}
    for case, command in cases.items():
        config = AgentConfig(name=case, kind=kind, command=command, env={"COPILOT_HOME": str(tmp_path / "home")})
        manager = manager_for(config, tmp_path / case)
        try:
            with pytest.raises(Exception, match="could not start the agent"):
                await manager.create_session(case)
            [sid] = manager.ids()
            view = manager.view(sid)
            assert view.status is SessionStatus.DISCONNECTED
            assert view.failure is not None and view.failure.kind is expected[case], view.reason
            if case == "dies":  # its stderr goes with the failure, whichever backend it was
                assert "config file /nope/settings.json is malformed" in view.failure.detail
        finally:
            await manager.shutdown()
