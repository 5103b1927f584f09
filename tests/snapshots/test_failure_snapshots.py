"""Snapshots of each named failure state: the sidebar names every one ("needs sign-in"…), and
the chat of the selected session says the title, the agent's words and the fix, in its
error row and its status line. The texts are what the real agents said (tests/unit/
test_failures.py), fed as the events the backends emit; one of them carries markup that
must show as text. Review with ``rsvg-convert`` before ``--snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.agents.base import BackendError, ConnectResult, Diagnostics, EventSink
from polypilot_tui.agents.catalog import builtin_tables
from polypilot_tui.domain.events import EventType
from tests.snapshots.fakes import Driver, FakeBackend, build_app
from tests.snapshots.test_snapshots import Case, run_before_for

#: session name → (event, its data): the turn's error (Copilot with its status code, ACP
#: agents without).
FAILURES: dict[str, tuple[str, dict[str, Any]]] = {
    "sign-in": (
        EventType.SESSION_ERROR,
        {
            "errorType": "authentication",
            "statusCode": 401,
            "message": "Authentication failed with provider at http://127.0.0.1:4011/v1 (HTTP 401).\n"
            "  Check your COPILOT_PROVIDER_API_KEY, COPILOT_PROVIDER_API_KEY_COMMAND, or "
            "COPILOT_PROVIDER_BEARER_TOKEN.",
        },
    ),
    "quota": (
        EventType.SESSION_ERROR,
        {
            "errorType": "acp",
            "message": "Internal error: You exceeded your current quota, please check your plan and billing "
            "details. ({'service': 'session', 'errorName': 'APIError'})",
        },
    ),
    "no-model": (
        EventType.SESSION_ERROR,
        {
            "errorType": "acp",
            "message": "unexpected status 404 Not Found: The model `gpt-[b]9[/b]` does not exist or you do not "
            "have access to it., url: http://127.0.0.1:4011/v1/responses (Internal error)",
        },
    ),
    "no-server": (
        EventType.SESSION_ERROR,
        {
            "errorType": "query",
            "message": "Could not connect to local model provider at http://127.0.0.1:4011/v1.\n"
            "  Check that the service is running and the port is correct.",
        },
    ),
}


#: session name → (what its backend's connect raises, its stderr tail): agents that never start.
START_FAILURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "missing": ("Copilot CLI not found at /opt/copilot/bin/copilot", ()),
    "dies": (
        "the agent exited during initialize (exit code 3)",
        ("Error: config file /home/me/.config/agent.json is malformed",),
    ),
}
NAMES = [*FAILURES, *START_FAILURES]
IDS = {name: f"s{n}" for n, name in enumerate(NAMES, start=2)}  # s1 is the app's default session


class FailsToStart(FakeBackend):
    """A backend whose agent never starts: connect raises what the real backends raise."""

    def __init__(self, sink: EventSink, error: str, stderr: tuple[str, ...]) -> None:
        super().__init__(sink)
        self.error = error
        self.stderr = stderr

    async def connect(self, resume_id: str | None) -> ConnectResult:
        raise BackendError(self.error)

    def diagnostics(self) -> Diagnostics:
        return Diagnostics("agent --acp", (), self.stderr)


def backend_factory(agent: str, sink: EventSink, workdir: Path) -> FakeBackend:
    for name, (error, stderr) in START_FAILURES.items():
        if workdir.name == IDS[name]:
            return FailsToStart(sink, error, stderr)
    return FakeBackend(sink)


async def failure_states(d: Driver) -> dict[str, str]:
    """One session in each named failure state (the app's default session stays idle)."""
    for name in NAMES:
        sid = await d.add(name)
        assert sid == IDS[name]
        if name in FAILURES:
            await d.send(sid, "hello")
            d.turn_start(sid)
            if name == "sign-in":  # as the catalog's copilot is signed in (the fakes' are demo agents)
                d.manager.session(sid).sign_in = str(builtin_tables()["copilot"]["sign_in"])
            event, data = FAILURES[name]
            d.emit(sid, event, **data)
    await d.advance(5)
    return IDS


@pytest.mark.parametrize("name", NAMES)
def test_failure_snapshot(name: str, snap_compare: Any, tmp_path: Path) -> None:
    case = Case(failure_states, size=(120, 32), select=name)
    app = build_app(tmp_path, backend_factory=backend_factory)
    assert snap_compare(app, terminal_size=case.size, run_before=run_before_for(case))
