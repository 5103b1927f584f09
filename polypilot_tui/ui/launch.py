"""Starting the dashboard: the agents catalog, the engine, persistence, then the app.

The app runs on a loop of our own so that SIGTERM, SIGHUP and SIGINT can be handled on it:
each ends the dashboard the way a confirmed ctrl+q does (ui/quit_signals.py).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.drivers.linux_driver import LinuxDriver

from polypilot_tui.agents.catalog import load_catalog
from polypilot_tui.config import DEMO_AGENT, AgentCatalog, AgentsFileError, Settings, demo_agent
from polypilot_tui.domain.hosts import HostEntry
from polypilot_tui.engine.api import Engine, EngineError
from polypilot_tui.infra import event_loop
from polypilot_tui.service.address import socket_path
from polypilot_tui.service.remote import RemoteEngine
from polypilot_tui.service.spawn import engine_listening, ensure_engine
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.quit_signals import QuitOnSignal
from polypilot_tui.ui.terminal import HangupSafeDriver

if TYPE_CHECKING:
    from polypilot_tui.service.attach import SshAttach

log = logging.getLogger(__name__)


def build_catalog(settings: Settings) -> tuple[AgentCatalog, list[str]]:
    """The agents to offer, and notes for the user (a broken agents file falls back to demo)."""
    try:
        catalog = load_catalog(settings)
    except AgentsFileError as exc:
        return AgentCatalog({DEMO_AGENT: demo_agent()}), [f"{exc} — continuing with the demo agent only."]
    notes = [f"Agents file entry skipped: {problem}" for problem in catalog.problems]
    # Said at start, not by a 401 from the model in the middle of the first turn.
    notes += [
        f"Agent {name!r} is not ready: {missing}"
        for name, agent in catalog.agents.items()
        if (missing := agent.missing_key())
    ]
    return catalog, notes


def dashboard_on(settings: Settings, catalog: AgentCatalog, engine: Engine, **options: Any) -> PolypilotApp:
    """The dashboard on ``engine``, reading the times in its views on the engine's own clock
    (another machine's over SSH): every launch and test rig makes it so."""
    return PolypilotApp(settings, catalog, engine, engine.clock, **options)


def run_app(settings: Settings) -> int:
    """Run the dashboard with the engine inside it until the user quits (``--in-process``)."""
    from polypilot_tui.engine.builder import build_engine  # the engine in this process: not when attached

    catalog, notes = build_catalog(settings)
    engine = build_engine(settings, catalog)
    return _start(lambda: dashboard_on(settings, catalog, engine, notes=notes))


def run_attached(settings: Settings, spawned: subprocess.Popen[bytes] | None = None) -> int:
    """Run the dashboard attached to the state folder's engine (started detached when none runs;
    ``spawned``: the engine started for it already, before the UI was imported).

    Quitting leaves the engine and its sessions running unless the user asks to stop it."""
    catalog, notes = build_catalog(settings)
    connect = local_connect(settings, spawned)
    return _start(lambda: dashboard_on(settings, catalog, RemoteEngine(connect), notes=notes))


def local_connect(settings: Settings, spawned: subprocess.Popen[bytes] | None) -> Callable[[], Awaitable[Path]]:
    """How the dashboard reaches this machine's engine: the one ``spawned`` early is waited
    for once, else one that listens is taken at once; a reconnect later looks afresh (and
    starts one when none runs)."""
    first = True

    async def connect() -> Path:
        nonlocal first
        at_start, first = first, False
        # An engine that listens at the first connect is taken as it is: the stream's snapshot
        # proves it answers (asking it first cost the first frame a request and ~3 ms).
        if at_start and spawned is None and engine_listening(settings):
            return socket_path(settings.state_dir)
        path, _started = await ensure_engine(settings, spawned=spawned if at_start else None)
        return path

    return connect


def run_over_ssh(settings: Settings, attach: SshAttach) -> int:
    """Run the dashboard attached to the engine of another machine, through an SSH tunnel.

    The first tunnel is opened before the terminal is taken, so a failure is said in the shell;
    the agents are that engine's, and so are its sessions' folders: the diff view, Finish and
    the new-session dialog ask that engine, which runs git there."""
    from polypilot_tui.service.attach import engine_agents
    from polypilot_tui.service.ssh import TunnelError

    async def prepare() -> PolypilotApp | None:
        try:
            catalog = await engine_agents(await attach.open())
        except (TunnelError, EngineError) as exc:
            print(f"polypilot: {exc}", file=sys.stderr)
            await attach.close()
            return None
        engine = RemoteEngine(attach.connect, on_detach=attach.close)
        return dashboard_on(settings, catalog, engine, remote=attach.target)

    return _start(prepare)


def run_fleet(
    settings: Settings,
    hosts: Sequence[HostEntry],
    ssh_options: Sequence[str] = (),
    spawned: subprocess.Popen[bytes] | None = None,
) -> int:
    """Run the dashboard on this machine's engine and every host's (docs/fleet.md): Local's
    sessions first; the hosts attach in the background, each over its own ssh forward, and
    one that fails never holds up the others. Quitting ends the forwards; the engines go on.
    ``spawned``: this machine's engine, started before the UI was imported, as for run_attached."""
    from polypilot_tui.service.fleet import FleetEngine, ssh_members  # a fleet's alone: not on one machine's start

    catalog, notes = build_catalog(settings)
    connect = local_connect(settings, spawned)

    def make() -> PolypilotApp:
        local = RemoteEngine(connect)
        fleet = FleetEngine(local, ssh_members(hosts, local.clock, ssh_options))
        return dashboard_on(settings, catalog, fleet, notes=notes)

    return _start(make)


def _start(make: Callable[[], PolypilotApp] | Callable[[], Awaitable[PolypilotApp | None]]) -> int:
    """Run the app ``make()`` makes (on the loop it will run on); its exit code."""
    # Textual sizes the screen with shutil.get_terminal_size(), which prefers COLUMNS/LINES
    # over the terminal itself: an exported COLUMNS=80 pinned the dashboard to 80 columns
    # in a wider terminal, resize or not. Rich reads them too, once, when the app's console
    # is made: so they go before the app is made. Under textual-serve (``polypilot web``,
    # TEXTUAL_DRIVER set) COLUMNS is the browser's width and the web driver's only source: kept.
    if "TEXTUAL_DRIVER" not in os.environ:
        for name in ("COLUMNS", "LINES"):
            os.environ.pop(name, None)
    return event_loop.run(_run(make))


async def _run(make: Callable[[], PolypilotApp] | Callable[[], Awaitable[PolypilotApp | None]]) -> int:
    """What ``app.run()`` does, with the quit signals handled on the app's loop."""
    made = make()
    app = await made if inspect.isawaitable(made) else made
    if app is None:
        return 1
    if app.driver_class is LinuxDriver:  # not a driver chosen with TEXTUAL_DRIVER
        app.driver_class = HangupSafeDriver
    QuitOnSignal(app).install(asyncio.get_running_loop())
    app.freeze_heap_after_first_frame()  # what start-up made stays: collections skip it
    app.keep_style_tokens()
    if app.remote is None:  # a session on another machine starts in its agent's folder there
        app.dashboard.first_folder = first_folder(app.settings, app.catalog)
    result = await app.run_async()
    return result if isinstance(result, int) else (app.return_code or 0)


def first_folder(settings: Settings, catalog: AgentCatalog) -> str | None:
    """Where a first session works: the folder polypilot started in, unless its agent has a
    folder of its own (the agents file's ``cwd``: None, the engine starts it there). The engine
    counts and diffs it when it is in git."""
    config = catalog.agents.get(settings.default_agent)
    if config is not None and config.cwd:
        return None
    try:
        return os.getcwd()
    except FileNotFoundError:  # started in a folder deleted since
        return None
