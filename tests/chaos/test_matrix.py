"""The fault matrix: every scenario on every backend where the fault can be made real.

Each cell runs one fault (tests/chaos/scenarios.py) on one driver (tests/chaos/drivers.py):
the demo agent in virtual time with PolyPilot's tiers, the fake ACP agent as a real process
with short tiers, and real agents from npm against the scripted model server (``e2e``).
The table of outcomes is printed at the end of the run and written to
``.cache/chaos-matrix.txt``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.matrix import record_cell, record_row
from tests.chaos.registry import BACKENDS, SCENARIOS
from tests.chaos.scenarios import SCENARIO_RUNNERS, verify


def _cells() -> list[object]:
    cells = []
    for backend, driver in BACKENDS.items():
        for scenario in SCENARIOS:
            runnable = scenario in driver.prompts or (
                scenario == "twenty-sessions" and scenario not in driver.not_applicable
            )
            if runnable:
                marks = [*driver.marks, pytest.mark.timeout(driver.timeout)]
                cells.append(pytest.param(scenario, backend, marks=marks, id=f"{scenario}-{backend}"))
    return cells


def test_every_cell_is_run_or_explained() -> None:
    for backend, driver in BACKENDS.items():
        for scenario in SCENARIOS:
            runs = scenario in driver.prompts or scenario == "twenty-sessions"
            assert runs or scenario in driver.not_applicable, f"{scenario} on {backend}: no prompt and no reason"
            if scenario in driver.prompts:
                assert scenario in driver.expect or scenario == "twenty-sessions", f"{scenario}/{backend}: no Expect"


@pytest.mark.parametrize(("scenario", "backend"), _cells())
async def test_fault(scenario: str, backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    record_cell(request.node, scenario, backend)
    driver = BACKENDS[backend](tmp_path)
    try:
        await driver.start()
        result = await SCENARIO_RUNNERS[scenario](driver, scenario)
        record_row(request.node, result.row(scenario, driver))
        verify(driver, result)
    finally:
        await driver.close()
