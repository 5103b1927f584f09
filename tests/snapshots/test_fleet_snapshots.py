"""Snapshots of a dashboard over several machines (issue 26): the sidebar grouped by host with
a live, a stale and an unreachable one; the host picker of the new-session dialog.

Times of day are UTC (the stale host's "since"), virtual time elsewhere.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.snapshots import fleet_scenarios
from tests.snapshots.fleet_scenarios import FleetDriver, fleet_app, utc  # noqa: F401 - utc: the fixture

HOSTS = {"devbox": ("demo", "claude"), "gpu": ("demo",)}
pytestmark = pytest.mark.usefixtures("utc")  # fleet_scenarios.utc: times of day in UTC


CASES: dict[str, Callable[[FleetDriver], Awaitable[None]]] = {
    "fleet_sidebar": fleet_scenarios.three_machines,
    "fleet_host_picker": fleet_scenarios.host_picker,
}


@pytest.mark.parametrize("name", list(CASES))
def test_fleet_snapshot(name: str, snap_compare: Any, tmp_path: Path) -> None:
    rig = fleet_app(tmp_path, HOSTS, unreachable="build")

    async def run_before(pilot: Pilot[Any]) -> None:
        await CASES[name](FleetDriver(pilot, rig))
        rig.app.clear_notifications()  # toasts expire on real time: never part of a snapshot
        await pilot.pause()

    assert snap_compare(rig.app, terminal_size=(120, 34), run_before=run_before)
