"""The chaos matrix's Copilot column: real faults on the real Copilot CLI (``e2e``).

The cells are the matrix's own (tests/chaos/scenarios.py runners, rows recorded the same
way) on :class:`~tests.chaos.copilot_driver.CopilotDriver`. When the registry already lists
``copilot``, tests/chaos/test_matrix.py runs those cells and this file runs only the
Copilot-only scenario (``stop-during-tool``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("tests.chaos.scenarios", reason="the chaos matrix (tests/chaos/scenarios.py) is not here")

from tests.chaos.copilot_driver import STOP_DURING_TOOL, CopilotDriver, stop_during_tool
from tests.chaos.matrix import record_cell, record_row
from tests.chaos.registry import BACKENDS, SCENARIOS
from tests.chaos.scenarios import SCENARIO_RUNNERS, verify

RUNNERS = {**SCENARIO_RUNNERS, STOP_DURING_TOOL: stop_during_tool}


def _cells() -> list[object]:
    registered = "copilot" in BACKENDS
    names = [
        s
        for s in [*SCENARIOS, STOP_DURING_TOOL]
        if s in CopilotDriver.prompts and (not registered or s not in SCENARIOS)
    ]
    marks = [*CopilotDriver.marks, pytest.mark.timeout(CopilotDriver.timeout)]
    return [pytest.param(name, marks=marks, id=f"{name}-copilot") for name in names]


def test_every_copilot_cell_is_run_or_explained() -> None:
    for scenario in SCENARIOS:
        runs = scenario in CopilotDriver.prompts or scenario == "twenty-sessions"  # test_matrix.py runs it
        assert runs or scenario in CopilotDriver.not_applicable, f"{scenario} on copilot: no prompt and no reason"
        if scenario in CopilotDriver.prompts:
            assert scenario in CopilotDriver.expect, f"{scenario}/copilot: no Expect"


@pytest.mark.parametrize("scenario", _cells())
async def test_copilot_fault(scenario: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    record_cell(request.node, scenario, "copilot")
    driver = CopilotDriver(tmp_path)
    try:
        await driver.start()
        result = await RUNNERS[scenario](driver, scenario)
        record_row(request.node, result.row(scenario, driver))
        verify(driver, result)
    finally:
        await driver.close()
