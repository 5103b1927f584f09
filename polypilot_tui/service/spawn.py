"""Finding the engine of a state folder, and starting one (detached) when none runs.

Light to import (the engine's client and verbs are imported when first asked; the settings'
models are not needed): a plain ``polypilot`` starts its engine before anything else is loaded
(:func:`start_engine_early`, from entry.py, on the raw settings), else the dashboard does with
:func:`spawn_engine` before its UI is imported, so the two load at once.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from polypilot_tui.infra.private import open_private, private_dir
from polypilot_tui.service.address import socket_path
from polypilot_tui.storage.lock import lock_holder

if TYPE_CHECKING:
    from polypilot_tui.config import Settings
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
EARLY_STOP_WAIT = 5.0
"""Seconds an early engine nobody claimed has to end on SIGTERM before it is killed."""


class EngineHome(Protocol):
    """Which engine: its state folder and agents file (the settings', or the raw sources')."""

    @property
    def state_dir(self) -> Path: ...

    @property
    def agents_file(self) -> Path | None: ...


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


def engine_command(settings: EngineHome) -> tuple[list[str], dict[str, str]]:
    """How to start this state folder's engine: argv and environment (settings pass as POLYPILOT_*)."""
    env = dict(os.environ)
    env["POLYPILOT_STATE_DIR"] = str(Path(settings.state_dir).resolve())
    if settings.agents_file is not None:
        env["POLYPILOT_AGENTS_FILE"] = str(Path(settings.agents_file).resolve())
    # -P: the folder the dashboard was started in (a repository, say) is not on the engine's import path.
    return [sys.executable, "-P", "-m", "polypilot_tui", "serve"], env


def engine_listening(settings: EngineHome) -> bool:
    """Whether something accepts a connection on the state folder's engine socket: a quick
    look without HTTP (before the dashboard's UI and the engine's client are imported, and at
    its first connect). A Unix socket connects at once, or within 1 s when its queue is full."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(socket_path(settings.state_dir)))
        except OSError:
            return False
    return True


def spawn_engine(settings: EngineHome) -> subprocess.Popen[bytes] | None:
    """Start the state folder's engine detached, without waiting for it; None when a process
    holds the folder already (an engine starting, or an old dashboard): that one is waited for."""
    state = private_dir(Path(settings.state_dir))
    if lock_holder(state) is not None:
        return None
    argv, env = engine_command(settings)
    err = open_private(state / ENGINE_ERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)  # may quote a setting
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env, start_new_session=True
        )
    finally:
        os.close(err)
    # The engine is this process's child for as long as this process lives: one that ends
    # first (a crash, a kill) is reaped here at once, not left a zombie for the dashboard's
    # life (each restart after a crash left one). Its Popen sees the end too (returncode).
    threading.Thread(target=process.wait, name=f"engine-reaper-{process.pid}", daemon=True).start()
    return process


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


class EarlyEngine:
    """The engine a plain ``polypilot`` started before its settings were validated, for the
    state folder and agents file the raw sources name (infra/settings_sources.py, which the
    models read too). The dashboard takes it only for exactly the folder and file the validated
    settings name; any other ending stops it."""

    def __init__(self, state_dir: Path, agents_file: Path | None) -> None:
        self.state_dir = state_dir
        self.agents_file = agents_file
        self.process: subprocess.Popen[bytes] | None = None
        self._claimed = False

    def claim(self, settings: EngineHome) -> subprocess.Popen[bytes] | None:
        """The engine's process when it was started for ``settings``' engine; else it is
        stopped, and None (the dashboard then finds or starts the right one)."""
        if (Path(settings.state_dir), settings.agents_file) == (self.state_dir, self.agents_file):
            self._claimed = True
            return self.process
        self.discard()
        return None

    def discard(self) -> None:
        """Stop the engine unless the dashboard claimed it (a start that ended before it did)."""
        process = self.process
        if self._claimed or process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(EARLY_STOP_WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start_engine_early() -> EarlyEngine | None:
    """Start the engine of a plain ``polypilot`` now, when none listens, for the state folder
    and agents file the raw settings name: it loads while the dashboard's settings and UI do.
    None when one listens, or anything is uncertain (the validated path meets it and says it)."""
    try:
        home = raw_engine_home()
        if home is None:
            return None
        early = EarlyEngine(*home)
        # A first start makes no folder before its settings are validated (a refused one would
        # leave it behind); a start that finds an engine listening has nothing to do.
        if not early.state_dir.is_dir() or engine_listening(early):
            return None
        early.process = spawn_engine(early)
    except Exception:  # noqa: BLE001 - whatever it is, the validated path meets it and says it
        return None
    return early if early.process is not None else None


def raw_engine_home() -> tuple[Path, Path | None] | None:
    """The state folder and agents file the settings' sources name, read as the models read
    them (config.py) but without them; None for what only the models can tell."""
    from polypilot_tui.infra import settings_sources as sources

    raw = sources.gathered_settings({}, sources.DOTENV_FILE)  # as Settings() gathers them
    state, agents = raw.get("state_dir"), raw.get("agents_file")
    if not isinstance(state, str | None) or not isinstance(agents, str | None) or "" in (state, agents):
        return None
    return (
        Path(state).expanduser() if state is not None else sources.default_state_dir(),
        Path(agents).expanduser() if agents is not None else None,
    )


def _last_words(path: Path) -> str:
    try:
        with os.fdopen(open_private(path, os.O_RDONLY), "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - LAST_WORDS_BYTES))
            text = fh.read(LAST_WORDS_BYTES).decode("utf-8", "replace")
    except OSError:
        return "it said nothing"
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:500] if lines else "it exited without a word"
