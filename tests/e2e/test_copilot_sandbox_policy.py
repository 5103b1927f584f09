"""allow-in-sandbox on the requests the real Copilot CLI sends: inside approved, outside asked.

Every request is refused after its verdict, so nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from polypilot_tui.agents.base import REJECT_ONCE
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode
from polypilot_tui.domain.sandbox_policy import reason_to_ask
from tests.support.copilot_e2e import copilot_agent, make_backend
from tests.support.model_server import ModelServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


async def test_the_cli_s_requests_are_placed(copilot_cli: Path, model_server: ModelServer, tmp_path: Path) -> None:
    work = tmp_path / "work"
    backend, sink = make_backend(copilot_agent(copilot_cli, model_server, tmp_path / "home", work), work)
    await backend.connect(None)
    prompts = {
        "TOOL CMD=`echo x > inside.txt`": "",
        "TOOL CMD=`echo x > /root/.ssh/evil`": "it names /root/.ssh/evil, outside the workspace",
        f'STEPS=[{{"tool": "create", "args": {{"path": "{work}/new.txt", "file_text": "hi"}}}}]': "",
        'STEPS=[{"tool": "view", "args": {"path": "/etc/hostname"}}]': "it names /etc/hostname, outside the workspace",
    }
    verdicts = {}
    try:
        for prompt in prompts:
            since = sink.mark()
            await backend.send(prompt)
            request = await sink.wait("permission.requested", since)
            verdicts[prompt] = reason_to_ask(request.data, str(work), Sandbox(SandboxMode.WORKSPACE))
            await backend.answer_permission(request.text("requestId"), REJECT_ONCE)
            await sink.idle(since)
    finally:
        await backend.close()
    assert verdicts == prompts
    assert not (work / "inside.txt").exists() and not (work / "new.txt").exists()
