"""A named failure travels: through the engine's wire to a client (views as JSON and back) and
into ``polypilot status --json`` — from the running engine and, once it is gone, from the
registry it left. The agent is one that is not installed (its command is not there)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from polypilot_tui.domain.failures import FailureKind, classify
from polypilot_tui.domain.safe_json import dump_json, load_json
from polypilot_tui.domain.view import SessionStatus, SessionView
from polypilot_tui.engine.codec import encode, view_from_json
from tests.service.test_commands import polypilot
from tests.support.engine_service import running_engine, short_state_dir
from tests.support.waiting import until_answer

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", list(FailureKind))
def test_a_view_with_each_failure_survives_the_wire(kind: FailureKind) -> None:
    texts = {
        FailureKind.NEEDS_SIGN_IN: "agent error: Authentication failed (HTTP 401).",
        FailureKind.RATE_LIMITED: "agent error: 429 Too Many Requests",
        FailureKind.MODEL_UNAVAILABLE: "agent error: The model `x` does not exist",
        FailureKind.SERVER_UNREACHABLE: "agent error: fetch failed",
        FailureKind.NOT_INSTALLED: "could not start the agent: Copilot CLI not found at /x",
        FailureKind.EXITED_AT_START: "could not start the agent: the agent exited during initialize (exit code 1)",
        FailureKind.SANDBOX_UNAVAILABLE: "the session is sandboxed and its sandbox cannot start: bubblewrap (bwrap) "
        "is not installed: install it with `sudo apt install bubblewrap` (Debian, Ubuntu)",
    }
    failure = classify(texts[kind], "copilot")
    assert failure is not None and failure.kind is kind
    view = SessionView("s1", "one", "copilot", SessionStatus.ERROR, texts[kind], 3, failure=failure)
    back = view_from_json(load_json(dump_json(encode(view)), "view"))
    assert back == view and type(back.failure.kind) is FailureKind  # type: ignore[union-attr]


async def test_status_json_names_the_failure_live_and_from_the_registry(tmp_path: Path) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(f'[ghost]\nkind = "acp"\ncommand = "{tmp_path / "no-such-agent"}"\n')
    state = short_state_dir()
    try:
        await status_live_then_offline(state, agents)
    finally:
        shutil.rmtree(state, ignore_errors=True)


async def status_live_then_offline(state: Path, agents: Path) -> None:
    async with running_engine(state, {"POLYPILOT_AGENTS_FILE": str(agents)}, keep=True) as engine:
        sid = (await engine.http.post("/sessions", {"agent": "ghost", "name": "ghostly"}))["id"]
        await engine.http.post(f"/sessions/{sid}/send", {"prompt": "hello"})
        view = await until_answer(
            lambda: engine.http.get(f"/sessions/{sid}"), lambda v: view_from_json(v).failure, 30, "the failure"
        )
        view = view_from_json(view)
        assert view.failure is not None and view.failure.kind is FailureKind.NOT_INSTALLED
        live = json.loads((await polypilot(state, "status", "--json")).out)
        [row] = live["sessions"]
        assert live["engine"] is True
        assert row["failure"] == {"kind": "not-installed", "title": "agent not installed", "fix": view.failure.fix}
        table = (await polypilot(state, "status")).out
        assert "agent not installed" in table  # the table's status column names it too
    offline = json.loads((await polypilot(state, "status", "--json")).out)
    assert offline["app_running"] is False
    [row] = offline["sessions"]
    assert row["status"] == "disconnected" and row["failure"]["kind"] == "not-installed", row
