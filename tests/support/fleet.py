"""Fleets over in-process engines, for tests of the dashboard and of FleetEngine's routing.

``fleet, members = fleet_of(local, {"dev": engine, "build": other})`` makes a FleetEngine whose
hosts are always-attached engines; ``await members["dev"].set_state(HostState.STALE, "why")``
turns a host stale (or back live), as a lost ssh link would, and the fleet publishes
HostChanged. Nothing here opens a socket: the ssh side is tests/e2e/test_fleet.py's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from polypilot_tui.domain.hosts import HostHealth, HostState
from polypilot_tui.engine.api import Engine
from polypilot_tui.service.fleet import FleetEngine, Member


class FixedMember:
    """A host whose engine is given (started by the fleet's start); its state is the test's."""

    def __init__(self, name: str, engine: Engine, target: str = "") -> None:
        self.name = name
        self.engine = engine
        self.health = HostHealth(name, target or f"{name}.example:22", engine.clock)
        self._changed: Callable[[], None] = lambda: None
        self.started = asyncio.Event()

    async def run(self, changed: Callable[[], None]) -> None:
        self._changed = changed
        await self.engine.start()
        self.health.live()
        changed()
        self.started.set()
        await asyncio.Event().wait()

    def set_state(self, state: HostState, reason: str = "") -> None:
        """The host is ``state`` now (LIVE: answering again), ``reason`` saying why not."""
        if state is HostState.LIVE:
            self.health.live()
        elif state is HostState.STALE:
            self.health.lost(reason)
        elif state is HostState.CONNECTING:
            self.health.connecting()
        else:
            self.health.failed(reason, state)
        self._changed()

    async def close(self, stop_engine: bool) -> None:
        await self.engine.detach(stop_engine)


def fleet_of(local: Engine, hosts: Mapping[str, Engine]) -> tuple[FleetEngine, dict[str, FixedMember]]:
    """A fleet of ``local`` and ``hosts`` (in their order), and its members by name."""
    members = {name: FixedMember(name, engine) for name, engine in hosts.items()}
    listed: list[Member] = list(members.values())
    return FleetEngine(local, listed), members


async def started(fleet: FleetEngine, members: Mapping[str, FixedMember], timeout: float = 10.0) -> None:
    """Start ``fleet`` and wait until every host is attached."""
    await fleet.start()
    await asyncio.wait_for(asyncio.gather(*(m.started.wait() for m in members.values())), timeout)
