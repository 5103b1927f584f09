"""``polypilot model SESSION [MODEL]`` as a script runs it, against a real engine on the demo agent."""

from __future__ import annotations

import pytest

from tests.service.test_commands import new_session, polypilot, view
from tests.support.engine_service import running_engine

pytestmark = pytest.mark.slow


async def test_model_lists_marks_the_current_one_switches_and_refuses() -> None:
    async with running_engine() as engine:
        sid = await new_session(engine, "beta")
        listed = await polypilot(engine.state, "model", "beta")
        assert listed.code == 0, listed.err
        assert listed.out.splitlines() == [
            "* demo-model\tDemo\tthe default: replies at the demo speed",
            "  demo-fast\tDemo Fast\ta pretend small model",
            "  demo-deep\tDemo Deep\ta pretend large model",
        ]
        switched = await polypilot(engine.state, "model", "beta", "demo-deep")
        assert (switched.code, switched.out) == (0, "beta: model demo-deep (from the next turn)\n"), switched.err
        assert (await view(engine, sid))["model"] == "demo-deep"
        assert (await polypilot(engine.state, "model", sid)).out.splitlines()[2].startswith("* demo-deep")
        refused = await polypilot(engine.state, "model", "beta", "gpt-9")
        assert refused.code == 1 and "does not offer the model 'gpt-9'" in refused.err
        unknown = await polypilot(engine.state, "model", "nobody")
        assert unknown.code == 1 and "no session 'nobody'" in unknown.err
