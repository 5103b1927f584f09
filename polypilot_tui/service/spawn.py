"""Finding the engine of a state folder, and starting one (detached) when none runs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from polypilot_tui.config import Settings
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.verbs import ENGINE_INFO, EngineInfo, NoArgs
from polypilot_tui.infra.private import open_private, private_dir
from polypilot_tui.service.address import socket_path
from polypilot_tui.service.client import EngineClient, EngineUnreachable
from polypilot_tui.storage.lock import lock_holder

START_TIMEOUT = 30.0
"""Seconds a new engine has to answer (it restores the saved sessions first)."""
ENGINE_ERR = "engine.err"
"""The engine's stderr, in the state folder: what it said before its log was set up."""
LAST_WORDS_BYTES = 16384
"""Bytes of the end of ``engine.err`` read for the engine's last words."""


async def engine_info(settings: Settings) -> EngineInfo | None:
    """What the running engine of this state folder says of itself, or None when none answers."""
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


async def ensure_engine(settings: Settings, timeout: float = START_TIMEOUT) -> tuple[Path, bool]:
    """The socket of the state folder's engine, started detached when none runs; and whether
    it was started now. EngineError (with what the engine said) when it does not come up."""
    path = socket_path(settings.state_dir)
    if await engine_info(settings) is not None:
        return path, False
    state = private_dir(Path(settings.state_dir))
    holder = lock_holder(state)
    if holder is None:
        argv, env = engine_command(settings)
        err = open_private(state / ENGINE_ERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)  # may quote a setting
        try:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env, start_new_session=True
            )
        finally:
            os.close(err)
    else:
        process = None  # an engine is starting (or an old dashboard holds the folder): wait for it
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await engine_info(settings) is not None:
            return path, process is not None
        if process is not None and process.poll() is not None:
            raise EngineError(f"the engine did not start: {_last_words(state / ENGINE_ERR)}")
        await asyncio.sleep(0.05)
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
