"""A dashboard over a fleet (issue 26), on virtual time with fixed ids: Local and hosts whose
engines are real LocalEngines (served on sockets of their own, or in process), grouped by the
real FleetEngine; a host that never answered is :class:`UnreachableMember`.

Ids say where a session runs: ``s1`` Local, ``d1`` devbox, ``g1`` gpu.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.hosts import HostHealth, HostState
from polypilot_tui.domain.workspace import FolderInfo
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.service.fleet import FleetEngine, Member
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.launch import dashboard_on
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.snapshots.fakes import AGENT_MODES, LAUNCH_FOLDER, Driver, FakeBackend, FixedEngine
from tests.support.engine_service import ServedEngine
from tests.support.fleet import FixedMember
from tests.support.waiting import until


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Times of day in UTC (a stale host's "since HH:MM"), whatever the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


REFUSED = "auth refused: dev@build.example: Permission denied (publickey)."


class HostEngine(FixedEngine):
    """A machine's engine with the dialogs' fixed answers, which notes the folders it is asked
    about (the new-session dialog must ask the host it makes the session on)."""

    def __init__(self, manager: SessionManager) -> None:
        super().__init__(manager)
        self.folders_asked: list[str] = []

    async def inspect_folder(self, request: verbs.FolderRef) -> FolderInfo:
        self.folders_asked.append(request.path)
        return FolderInfo(request.path) if request.path.startswith("~") else await super().inspect_folder(request)

    async def list_folders(self, request: verbs.FolderQuery) -> verbs.FolderListing:
        self.folders_asked.append(request.path)
        return verbs.FolderListing(request.path, ("projects",) if request.path == "~" else ())


class UnreachableMember:
    """A host that never answers: its try failed with ``reason`` (as ssh's refusal of the key)."""

    def __init__(self, name: str, target: str, engine: Engine, reason: str) -> None:
        self.name = name
        self.engine = engine
        self.health = HostHealth(name, target, engine.clock)
        self._reason = reason

    async def run(self, changed: Callable[[], None]) -> None:
        self.health.failed(self._reason)
        changed()
        await asyncio.Event().wait()

    async def close(self, stop_engine: bool) -> None:
        return None


class PingedMember(FixedMember):
    """A host whose engine is asked whether it is there every ``every`` seconds (real time, as
    the fleet's pinger does over ssh): one that does not answer within ``bound`` is stale."""

    every = 0.2
    bound = 2.0

    async def run(self, changed: Callable[[], None]) -> None:
        ping = asyncio.ensure_future(self._ping(changed))
        try:
            await super().run(changed)
        finally:
            ping.cancel()

    async def _ping(self, changed: Callable[[], None]) -> None:
        await self.started.wait()
        while True:
            await asyncio.sleep(self.every)
            try:
                await asyncio.wait_for(self.engine.call(verbs.ENGINE_INFO, verbs.NoArgs()), self.bound)
            except Exception as exc:  # noqa: BLE001 - whatever it was, the host does not answer
                if self.health.view.live:
                    self.health.lost(f"its engine does not answer: {exc or type(exc).__name__}")
                    changed()
            else:
                self.health.seen()


@dataclass
class Fleet:
    """The app, the engines behind it by host ("" Local), and the hosts' members."""

    app: PolypilotApp
    fleet: FleetEngine
    engines: dict[str, HostEngine]
    members: dict[str, FixedMember]
    clock: FakeClock
    served: dict[str, ServedEngine]
    """Each engine's server by host ("" Local), when served."""


def _engine(tmp_path: Path, name: str, prefix: str, clock: FakeClock, agents: tuple[str, ...]) -> HostEngine:
    state = tmp_path / (name or "local")
    state.mkdir()
    settings = Settings.read(None, state_dir=state, record=False, heartbeat_seconds=3600)
    catalog = AgentCatalog({agent: AgentConfig(name=agent, kind="demo") for agent in agents})
    ids = itertools.count(1)
    manager = SessionManager(
        settings,
        catalog,
        clock,
        backend_factory=lambda agent, sink, workdir: FakeBackend(sink, AGENT_MODES.get(agent, "")),
        id_factory=lambda: f"{prefix}{next(ids)}",
    )
    return HostEngine(manager)


def fleet_app(
    tmp_path: Path,
    hosts: Mapping[str, tuple[str, ...]],
    *,
    unreachable: str = "",
    served: bool = False,
    pinged: bool = False,
    theme: str = "polypilot-night",
) -> Fleet:
    """Local (agent ``demo``) and ``hosts`` (name -> its agents), then ``unreachable`` (a host
    whose key is refused) when named; each engine served on a socket of its own when ``served``;
    the hosts' engines asked whether they are there when ``pinged`` (else their states are the
    test's alone)."""
    clock = FakeClock()
    engines = {"": _engine(tmp_path, "", "s", clock, ("demo",))}
    for name, agents in hosts.items():
        engines[name] = _engine(tmp_path, name, name[0], clock, agents)
    shown: dict[str, ServedEngine] = {}

    def front(name: str) -> Engine:
        if not served:
            return engines[name]
        shown[name] = ServedEngine(engines[name], start=True)
        return shown[name].attach()

    kind = PingedMember if pinged else FixedMember
    members = {name: kind(name, front(name), f"dev@{name}.example:22") for name in hosts}
    listed: list[Member] = list(members.values())
    if unreachable:
        nobody = _engine(tmp_path, unreachable, unreachable[0], clock, ("demo",))  # never asked: no sessions
        listed.append(UnreachableMember(unreachable, f"dev@{unreachable}.example", nobody, REFUSED))
    fleet = FleetEngine(front(""), listed)
    settings = Settings.read(
        None,
        state_dir=tmp_path / "local",
        theme=theme,
        record=False,
        heartbeat_seconds=3600,
    )
    catalog = AgentCatalog({"demo": AgentConfig(name="demo", kind="demo")})
    app = dashboard_on(settings, catalog, fleet, theme_dirs=[BUNDLED_DIR], keymap_file=tmp_path / "no-keymap.toml")
    app.dashboard.new_session.launch_folder = LAUNCH_FOLDER
    return Fleet(app, fleet, engines, members, clock, shown)


class FleetDriver(Driver):
    """A :class:`Driver` whose events go to the sessions of one host at a time (:meth:`on`)."""

    def __init__(self, pilot: Pilot[Any], rig: Fleet) -> None:
        self.pilot = pilot
        self.app = rig.app
        self.rig = rig
        self.clock = rig.clock
        self.manager = rig.engines[""].manager
        self._calls = itertools.count(1)

    def on(self, host: str) -> FleetDriver:
        """Events and new sessions go to ``host``'s engine from now ("" Local)."""
        self.manager = self.rig.engines[host].manager
        return self

    def caught_up(self) -> bool:
        """The dashboard lists what every engine behind it holds, each as it is now."""
        fleet = self.rig.fleet
        return all(
            all(sid in fleet.ids() and fleet.view(sid) == engine.view(sid) for sid in engine.ids())
            for engine in self.rig.engines.values()
        )

    async def settle(self) -> None:
        await until(
            lambda: all(m.started.is_set() for m in self.rig.members.values()),
            10,
            "hosts attached",
            pause=self.pilot.pause,
        )
        for _ in range(500):
            if self.app.dashboard.agents_found.offers is not None:
                break
            await self.pilot.pause(0.01)
        await self.clock.settle()
        await until(self.caught_up, 10, "the fleet's mirrors", pause=self.pilot.pause)
        await self.app.dashboard.flush()
        await self.pilot.pause()

    async def add(self, name: str, agent: str = "demo") -> str:
        sid = self.manager.add_session(agent, name=name)
        await self.settle()
        return sid


async def three_machines(d: FleetDriver) -> None:
    """Local with two sessions; devbox live with a session asking permission and one idle; gpu
    stale (it stopped answering 12 minutes after it was last seen) with its session as last
    seen; build never answered (its key refused)."""
    await d.settle()
    await d.finished_turn("s1", "what changed in the parser?", "Two functions, both in parse.py.")
    api = await d.add("api tests")
    await d.finished_turn(api, "run the api tests", "All 212 passed.")
    d.on("devbox")
    web = await d.add("web build")
    await d.finished_turn(web, "build the site", "Built in 41 s.")
    ask = await d.add("migrations")
    await d.send(ask, "apply the migrations")
    d.turn_start(ask)
    d.ask_permission(ask, d.tool(ask, "bash", "alembic upgrade head"), "Run alembic upgrade head?")
    d.on("gpu")
    train = await d.add("train model")
    await d.finished_turn(train, "train for one epoch", "Done: loss 0.41.")
    await d.settle()
    await d.clock.advance(12 * 60)
    d.rig.members["gpu"].set_state(HostState.STALE, "ssh: connect to host gpu.example port 22: Connection timed out")
    d.on("")
    await d.app.dashboard.heartbeat()
    await d.settle()


async def host_picker(d: FleetDriver) -> None:
    """The three machines, then ctrl+n: the host picker (the live ones to pick, the others greyed out)."""
    await three_machines(d)
    d.app.clear_notifications()  # the alerts (named by host) would stay on the picker's screen
    await d.pilot.pause()
    await d.pilot.press("ctrl+n")
    await until(lambda: type(d.app.screen).__name__ == "HostPickerScreen", 10, "the host picker", pause=d.pilot.pause)
    await d.pilot.pause()
