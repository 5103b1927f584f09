"""Finding the engine of a state folder, and starting one (detached) when none runs.

Light to import (the engine's client and verbs are imported when first asked): the dashboard
starts its engine with :func:`spawn_engine` before its UI is imported, so the two load at once.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from polypilot_tui.config import Settings
from polypilot_tui.infra.private import open_private, private_dir
from polypilot_tui.service.address import socket_path
from polypilot_tui.storage.lock import lock_holder

if TYPE_CHECKING:
    from polypilot_tui.engine.verbs import EngineInfo

START_TIMEOUT = 30.0
"""Seconds a new engine has to answer (it restores the saved sessions first)."""
ENGINE_ERR = "engine.err"
"""The engine's stderr, in the state folder: what it said before its log was set up."""
POLL = 0.01
"""Seconds between looks for a starting engine: a dashboard waits on it (a look is a stat, or
one request once the socket is there)."""
LAST_WORDS_BYTES = 16384
"""Bytes of the end of ``engine.err`` read for the engine's last words."""


async def engine_info(settings: Settings) -> EngineInfo | None:
    """What the running engine of this state folder says of itself, or None when none answers."""
    from polypilot_tui.engine.verbs import ENGINE_INFO, NoArgs
    from polypilot_tui.service.client import EngineClient, EngineUnreachable

    path = socket_path(settings.state_dir)
    if not path.exists():
        return None
    client = EngineClient(path, timeout=5.0)
    try:
        return await client.call(ENGINE_INFO, NoArgs())
    except EngineUnreachable:
        return None
    finally:
        await client.aclose()


def engine_command(settings: Settings) -> tuple[list[str], dict[str, str]]:
    """How to start this state folder's engine: argv and environment (settings pass as POLYPILOT_*)."""
    env = dict(os.environ)
    env["POLYPILOT_STATE_DIR"] = str(Path(settings.state_dir).resolve())
    if settings.agents_file is not None:
        env["POLYPILOT_AGENTS_FILE"] = str(Path(settings.agents_file).resolve())
    # -P: the folder the dashboard was started in (a repository, say) is not on the engine's import path.
    return [sys.executable, "-P", "-m", "polypilot_tui", "serve"], env


def engine_listening(settings: Settings) -> bool:
    """Whether something accepts a connection on the state folder's engine socket: a quick
    look without HTTP, for before the dashboard's UI (and the engine's client) is imported."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(socket_path(settings.state_dir)))
        except OSError:
            return False
    return True


def spawn_engine(settings: Settings) -> subprocess.Popen[bytes] | None:
    """Start the state folder's engine detached, without waiting for it; None when a process
    holds the folder already (an engine starting, or an old dashboard): that one is waited for."""
    state = private_dir(Path(settings.state_dir))
    if lock_holder(state) is not None:
        return None
    argv, env = engine_command(settings)
    err = open_private(state / ENGINE_ERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)  # may quote a setting
    try:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env, start_new_session=True
        )
    finally:
        os.close(err)


async def ensure_engine(
    settings: Settings, timeout: float = START_TIMEOUT, spawned: subprocess.Popen[bytes] | None = None
) -> tuple[Path, bool]:
    """The socket of the state folder's engine, started detached when none runs; and whether
    it was started now. ``spawned``: the engine :func:`spawn_engine` started already, to wait
    for. EngineError (with what the engine said) when it does not come up."""
    from polypilot_tui.engine.api import EngineError

    path = socket_path(settings.state_dir)
    if spawned is None and await engine_info(settings) is not None:
        return path, False
    state = private_dir(Path(settings.state_dir))
    holder = lock_holder(state) if spawned is None else None
    process = spawned if spawned is not None else spawn_engine(settings) if holder is None else None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await engine_info(settings) is not None:
            return path, process is not None
        if process is not None and process.poll() is not None:
            raise EngineError(f"the engine did not start: {_last_words(state / ENGINE_ERR)}")
        await asyncio.sleep(POLL)
    who = holder.describe() if holder is not None else f"pid {process.pid if process else '?'}"
    raise EngineError(f"no engine answered on {path} within {timeout:.0f} s ({who} holds the state folder)")


def _last_words(path: Path) -> str:
    try:
        with os.fdopen(open_private(path, os.O_RDONLY), "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - LAST_WORDS_BYTES))
            text = fh.read(LAST_WORDS_BYTES).decode("utf-8", "replace")
    except OSError:
        return "it said nothing"
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:500] if lines else "it exited without a word"
