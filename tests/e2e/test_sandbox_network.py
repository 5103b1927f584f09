"""A sandboxed Copilot CLI session with a network rule, on the scripted model (issue 27).

The session's rule lists nothing: only its model endpoint (added from its provider) is
reachable. It completes a turn against its model server, and its shell tool cannot reach a
second local server: nothing listens there in the sandbox's own loopback, and the proxy
refuses it, and a named host, with why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from msgspec import structs

from polypilot_tui.agents.base import ALLOW_ONCE
from polypilot_tui.agents.copilot.backend import CopilotBackend
from polypilot_tui.agents.sandbox import plan_for, sandbox_problem
from polypilot_tui.config import Settings
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode
from tests.support.copilot_e2e import Collector, copilot_agent
from tests.support.http_server import LocalServer, local_server
from tests.support.model_server import ModelServer

RULE = Sandbox(SandboxMode.WORKSPACE, network=())
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(120),
    pytest.mark.skipif(sandbox_problem(RULE) is not None, reason=f"no sandbox here: {sandbox_problem(RULE)}"),
]


@pytest.fixture
def second_server() -> Iterator[LocalServer]:
    """A local server the session was not allowed (60 s at most)."""
    with local_server(lambda _path: b"the second server's secret") as server:
        yield server


async def test_a_session_with_a_network_rule_reaches_its_model_and_not_another_server(
    copilot_cli: Path, model_server: ModelServer, second_server: LocalServer, tmp_path: Path
) -> None:
    home, work = tmp_path / "copilot-home", tmp_path / "work"
    home.mkdir()
    agent = copilot_agent(copilot_cli, model_server, home, work)
    agent = structs.replace(agent, **{"sandbox_writable": [str(home)]})
    settings = Settings.read(None, state_dir=tmp_path / "state")
    plan = plan_for(RULE, work, agent, settings)
    assert plan is not None and plan.rules.network == (f"127.0.0.1:{model_server.port}",)
    port = second_server.port
    sink = Collector()
    backend = CopilotBackend(agent, sink, SystemClock(), settings, tmp_path / "session", sandbox=plan)
    await backend.connect(None)
    try:
        # Loopback goes direct (NO_PROXY) and finds nothing listening; asked of the proxy, the
        # machine's loopback and a named host are refused with why.
        proxied = "curl -sS --noproxy '' -x $HTTP_PROXY"
        await backend.send(
            f"TOOL CMD=<curl -sS http://127.0.0.1:{port}/ ; {proxied} http://127.0.0.1:{port}/ ; "
            "curl -sS http://example.com/>"
        )
        request = await sink.wait("permission.requested")
        await backend.answer_permission(request.text("requestId"), ALLOW_ONCE)
        await sink.idle()
        answer = sink.messages()
        assert f"Failed to connect to 127.0.0.1 port {port}" in answer
        assert f"polypilot sandbox: 127.0.0.1:{port} is not in this session's network rule" in answer
        assert "polypilot sandbox: example.com:80 is not in this session's network rule" in answer
        assert "secret" not in answer
        assert second_server.asked == 0
        assert len(model_server.model_requests()) >= 2  # the turn and its tool result reached the model
    finally:
        await backend.close()
