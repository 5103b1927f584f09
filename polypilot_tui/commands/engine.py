"""``polypilot serve`` and ``polypilot engine start|status|stop``: the engine service's life."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

from polypilot_tui.commands.output import EXIT_OK, say
from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.codec import encode
from polypilot_tui.engine.verbs import ENGINE_STOP, EngineInfo, NoArgs
from polypilot_tui.infra import event_loop
from polypilot_tui.infra.collector import started
from polypilot_tui.service.address import socket_path
from polypilot_tui.service.serve import EngineRefused, serve
from polypilot_tui.service.spawn import engine_info, ensure_engine

EXIT_NO_ENGINE = 5
"""``engine status`` / ``engine stop``: no engine runs for this state folder."""
EXIT_REFUSED = 6
"""The engine could not start (another one runs, the socket cannot be made)."""
STOP_WAIT = 30.0


def cmd_serve(settings: Settings, catalog: AgentCatalog) -> int:
    """Run the engine in this process until it is stopped."""
    try:
        return event_loop.run(_serve_then_collect(settings, catalog))
    except EngineRefused as exc:
        say(f"polypilot: {exc}", err=True)
        return EXIT_REFUSED
    finally:
        gc.enable()


async def _serve_then_collect(settings: Settings, catalog: AgentCatalog) -> int:
    """Serve, with no garbage collection until the engine listens (``polypilot`` starts with
    none: entry.py): a dashboard that started it waits for that. What start-up made (imports,
    restored sessions) is then frozen, as the dashboard does at its first frame: it lives as
    long as the engine, and collections need not walk it again."""
    ready = asyncio.Event()
    serving = asyncio.ensure_future(serve(settings, catalog, ready))
    listening = asyncio.ensure_future(ready.wait())
    await asyncio.wait({serving, listening}, return_when=asyncio.FIRST_COMPLETED)
    listening.cancel()
    if ready.is_set():
        started()
    gc.enable()  # serve ended before it listened: nothing to freeze
    return await serving


def cmd_engine(settings: Settings, action: str, json_mode: bool = False) -> int:
    """``start`` (detached, when none runs; prints where it listens), ``status``, ``stop``."""
    return event_loop.run(_engine(settings, action, json_mode))


async def _engine(settings: Settings, action: str, json_mode: bool) -> int:
    if action == "start":
        try:
            path, started = await ensure_engine(settings)
        except EngineError as exc:
            say(f"polypilot: {exc}", err=True)
            return EXIT_REFUSED
        running = await engine_info(settings)
        say(dump_json({"socket": str(path), "pid": running.pid if running else None, "started": started}))
        return EXIT_OK
    info = await engine_info(settings)
    if info is None:
        say(f"No engine runs for {settings.state_dir}.", err=True)
        return EXIT_NO_ENGINE
    if action == "status":
        if json_mode:
            say(dump_json({**encode(info), "socket": str(socket_path(settings.state_dir))}))
        else:
            where = socket_path(settings.state_dir)
            say(
                f"Engine pid {info.pid} on {where}: {info.sessions} session(s), "
                f"{info.running_turns} turn(s) running, {info.attached} client(s) attached."
            )
        return EXIT_OK
    return await _stop(settings, info)


async def _stop(settings: Settings, info: EngineInfo) -> int:
    from polypilot_tui.service.client import EngineClient  # not on `serve`'s path: the engine starts sooner

    client = EngineClient(socket_path(settings.state_dir))
    try:
        await client.call(ENGINE_STOP, NoArgs())
    finally:
        await client.aclose()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STOP_WAIT
    while loop.time() < deadline:
        if not Path(socket_path(settings.state_dir)).exists() and await engine_info(settings) is None:
            say(f"Engine pid {info.pid} stopped.")
            return EXIT_OK
        await asyncio.sleep(0.05)
    say(f"polypilot: engine pid {info.pid} did not stop within {STOP_WAIT:.0f} s", err=True)
    return EXIT_REFUSED
