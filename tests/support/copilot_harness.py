"""A real SessionManager on the real Copilot CLI and the scripted model server.

Shared by the manager, ``polypilot run``, restart and chaos tests and by
bench/stop_latency.py: builds the agents catalog entry (kind ``copilot``, the cached CLI,
the model server as BYOK provider, the key in a test env var), records each session's
status as it changes, and finds Copilot CLI processes in /proc.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from msgspec import structs

from polypilot_tui.config import AgentCatalog, AgentConfig, Settings, WatchdogSettings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.records import Record, ViewChanged
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.infra.process_tree import descendants
from tests.support.copilot_e2e import KEY, KEY_ENV, copilot_agent
from tests.support.model_server import ModelServer

AGENT = "copilot"


def catalog_entry(cli: Path, server: ModelServer, root: Path) -> AgentConfig:
    """The agents-file entry of a Copilot session on the scripted model (own COPILOT_HOME)."""
    config = copilot_agent(cli, server, root / "copilot-home", root / "work")
    return structs.replace(config, **{"name": AGENT})


def agents_toml(cli: Path, server: ModelServer, root: Path) -> str:
    """The same entry as an agents file (the key is named, never written: see ``run_env``)."""
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    return (
        f'[{AGENT}]\nkind = "copilot"\ncommand = "{cli}"\nmodel = "gpt-4.1"\ncwd = "{work}"\n'
        f'env = {{ COPILOT_HOME = "{root / "copilot-home"}" }}\n'
        f'provider = {{ base_url = "{server.base_url}", api_key_env = "{KEY_ENV}" }}\n'
    )


def run_env(state_dir: Path, agents_file: Path, **extra: str) -> dict[str, str]:
    """Environment for a ``polypilot`` subprocess: our state dir, our agents, the test key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env.update(
        {
            "POLYPILOT_STATE_DIR": str(state_dir),
            "POLYPILOT_AGENTS_FILE": str(agents_file),
            "POLYPILOT_DEFAULT_AGENT": AGENT,
            KEY_ENV: KEY,
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def make_manager(
    cli: Path, server: ModelServer, root: Path, *, watchdog: WatchdogSettings | None = None, **settings: Any
) -> SessionManager:
    """A manager with the default backend factory and a ``copilot`` catalog entry."""
    options: dict[str, Any] = {"state_dir": root / "state", "record": False, **settings}
    if watchdog is not None:
        options["watchdog"] = watchdog
    config = Settings.read(None, **options)
    return SessionManager(config, AgentCatalog({AGENT: catalog_entry(cli, server, root)}), SystemClock())


class StatusLog:
    """Every distinct status each session showed, in order (what the sidebar displayed)."""

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager
        self.seen: dict[str, list[str]] = defaultdict(list)
        self.times: dict[str, list[tuple[float, str]]] = defaultdict(list)
        manager.subscribe(self._changed, ViewChanged)

    def _changed(self, change: Record) -> None:
        sid = change.session_id
        if sid not in self.manager.ids():
            return
        status = self.manager.view(sid).status.value
        if not self.seen[sid] or self.seen[sid][-1] != status:
            self.seen[sid].append(status)
            self.times[sid].append((time.monotonic(), status))

    def mark(self, sid: str) -> int:
        return len(self.seen[sid])

    def since(self, sid: str, mark: int = 0) -> list[str]:
        return self.seen[sid][mark:]

    def first_time(self, sid: str, status: str, after: float = 0.0) -> float | None:
        return next((t for t, s in self.times[sid] if s == status and t >= after), None)


def in_order(seen: list[str], wanted: Iterable[str]) -> bool:
    """``wanted`` is a subsequence of ``seen``."""
    it = iter(seen)
    return all(any(s == w for s in it) for w in wanted)


def texts(manager: SessionManager, sid: str, kind: ItemKind) -> list[str]:
    return [item.text for item in manager.history(sid) if item.kind is kind]


def cli_pid(manager: SessionManager, sid: str) -> int | None:
    backend = manager.backend(sid)
    return getattr(backend, "pid", None) if backend is not None else None


# ---- processes ------------------------------------------------------------------------
def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) from /proc/<pid>/stat."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None  # a zombie is dead; only its parent has not reaped it yet
    return int(fields[1]), int(fields[19])


def boot_ticks_now() -> int:
    """The current time in /proc start-time units (clock ticks since boot)."""
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return int(uptime * os.sysconf("SC_CLK_TCK"))


def copilot_processes(
    cli: Path, *, started_after: int | None = None, ancestor: int | None = None, home: Path | None = None
) -> list[int]:
    """Live Copilot CLI processes (by executable) that match any of: started at or after a
    tick, ``ancestor`` in their parent chain, ``COPILOT_HOME=home`` in their environment
    (an orphan re-parented to init keeps its environment, not its parent chain)."""
    found = []
    target = os.path.realpath(cli)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            exe = os.readlink(entry / "exe")
        except OSError:
            continue
        if os.path.realpath(exe) != target:
            continue
        stat = _stat(pid)
        if stat is None:
            continue
        parent, start = stat
        chain = _ancestors(pid)
        if (
            (started_after is not None and start >= started_after)
            or (ancestor is not None and ancestor in chain)
            or (home is not None and _has_home(pid, home))
        ):
            found.append(pid)
    return found


def home_processes(home: Path) -> list[int]:
    """Every live process (CLI, its tool shells, anything they started) whose environment
    has ``COPILOT_HOME=home``: what a test's agent left behind, whoever its parent is now."""
    found = []
    for entry in Path("/proc").iterdir():
        if (
            entry.name.isdigit()
            and int(entry.name) != os.getpid()
            and _stat(int(entry.name)) is not None
            and _has_home(int(entry.name), home)
        ):
            found.append(int(entry.name))
    return found


def _has_home(pid: int, home: Path) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"COPILOT_HOME={home}".encode() in environ


def _ancestors(pid: int) -> list[int]:
    chain = []
    while pid > 1 and len(chain) < 64:
        stat = _stat(pid)
        if stat is None:
            break
        pid = stat[0]
        chain.append(pid)
    return chain


def alive(pid: int) -> bool:
    return _stat(pid) is not None


def running_under(pid: int, program: str) -> list[int]:
    """The live processes below ``pid`` running ``program`` (a shell tool's command, started)."""
    found = []
    for child in descendants(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == program.encode() and alive(child):
            found.append(child)
    return found
