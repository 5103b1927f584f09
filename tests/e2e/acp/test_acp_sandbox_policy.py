"""allow-in-sandbox on the requests real ACP agents send: inside approved, outside asked.

The permission event the backend emits must carry what the policy places (the tool call's
locations, its command and working folder); each request is refused, so nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from polypilot_tui.agents.acp.backend import AcpBackend
from polypilot_tui.agents.base import REJECT_ONCE
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode
from polypilot_tui.domain.sandbox_policy import reason_to_ask
from tests.agents.acp_support import Recorder

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

ON = Sandbox(SandboxMode.WORKSPACE)


async def test_a_real_agent_s_request_is_placed(
    make_backend: Callable[..., tuple[AcpBackend, Recorder]], workspace: Path
) -> None:
    backend, rec = make_backend("s1")
    await backend.connect(None)
    verdicts = []
    try:
        for prompt in ("TOOL CMD=`echo x > inside.txt`", "TOOL CMD=`echo x > /root/.ssh/evil`"):
            after = len(rec.events)
            await backend.send(prompt)
            ask = await rec.wait_for("permission.requested", after=after, timeout=60)
            verdicts.append(reason_to_ask(ask.data, str(workspace), ON))
            await backend.answer_permission(ask.get("requestId"), REJECT_ONCE)
            await rec.wait_for("session.idle", after=after, timeout=60)
    finally:
        await backend.close()
    assert verdicts == ["", "it names /root/.ssh/evil, outside the workspace"]
    assert not (workspace / "inside.txt").exists()
