"""Helpers of the reliability tests (issue #11): real processes, real files, real mounts.

The dashboard runs as a real process on a pseudo-terminal; ``polypilot run`` and ``status``
run as real subprocesses; the fake ACP agent (tests/support/fake_acp_agent.py) is a real
agent process. Read-only folders and full disks are real mounts (tmpfs, read-only bind
mounts): those tests need root and are skipped, with the reason, where mounting is not
allowed.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import Persistence
from polypilot_tui.infra import process_tree
from polypilot_tui.storage.lock import lock_holder
from tests.support.processes import alive
from tests.support.waiting import until, until_blocking

ROOT = Path(__file__).resolve().parents[2]
_CSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
POLYPILOT = [sys.executable, "-m", "polypilot_tui"]  # as the `polypilot` script starts (entry.py)
FAKE_AGENT = ROOT / "tests" / "support" / "fake_acp_agent.py"


def clean_env(state: Path, **extra: str) -> dict[str, str]:
    """The environment of a polypilot subprocess: no developer POLYPILOT_* settings, our state folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env.update({"POLYPILOT_STATE_DIR": str(state), "PYTHONUNBUFFERED": "1", "TERM": "xterm-256color"})
    env.update(extra)
    return env


def polypilot(env: dict[str, str], *args: str, timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run one polypilot command to its end (bounded)."""
    return subprocess.run(
        [*POLYPILOT, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        **kwargs,
    )


def toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def fake_agents_file(
    path: Path,
    *,
    name: str = "fake",
    env: dict[str, str] | None = None,
    api_key_env: str | None = None,
    shell: str | None = None,
) -> Path:
    """An agents file with the fake ACP agent (``shell``: run it through ``sh -c`` so it has a child)."""
    if shell is not None:
        command, args = "/bin/sh", ["-c", shell.format(agent=f"{sys.executable} {FAKE_AGENT}")]
    else:
        command, args = sys.executable, [str(FAKE_AGENT)]
    lines = [
        f"[{name}]",
        'kind = "acp"',
        f"command = {toml_string(command)}",
        "args = [" + ", ".join(toml_string(a) for a in args) + "]",
    ]
    if env:
        lines.append("env = { " + ", ".join(f"{k} = {toml_string(v)}" for k, v in env.items()) + " }")
    if api_key_env:
        lines.append(f'provider = {{ base_url = "http://127.0.0.1:9/v1", api_key_env = "{api_key_env}" }}')
    path.write_text("\n".join(lines) + "\n")
    return path


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``, each before its own children."""
    return [p for p in process_tree.descendants(pid) if alive(p)]


class Dashboard:
    """The real dashboard (``polypilot``) on a pseudo-terminal; its screen output is drained."""

    def __init__(self, env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [*POLYPILOT, "--in-process"],
            cwd=ROOT,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        """The terminal's end the test holds (closing it is a closed terminal window)."""
        self.screen = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(self.master, 65536):
                self.screen += chunk

    def text(self) -> str:
        """The screen output so far without CSI sequences (what a reader would see, roughly)."""
        return _CSI.sub("", bytes(self.screen).decode("utf-8", "replace"))

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def wait_for_lock(self, state: Path, timeout: float = 60) -> None:
        until_blocking(
            lambda: (h := lock_holder(state)) is not None and h.pid == self.proc.pid or self.proc.poll() is not None,
            timeout,
            "the dashboard to take the state folder",
        )
        assert self.proc.poll() is None, bytes(self.screen)[-2000:]

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(15)

    def close(self) -> None:
        self.kill()
        with contextlib.suppress(OSError):
            os.close(self.master)


@pytest.fixture
def dashboards() -> Iterator[Callable[[dict[str, str]], Dashboard]]:
    started: list[Dashboard] = []

    def start(env: dict[str, str]) -> Dashboard:
        started.append(Dashboard(env))
        return started[-1]

    yield start
    for dashboard in started:
        dashboard.close()


# ---- mounts --------------------------------------------------------------------------
def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise OSError(done.stderr.strip() or f"mount {' '.join(args)} failed")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


class Mounts:
    """Real mounts for one test, undone at its end."""

    def __init__(self) -> None:
        self._mounted: list[Path] = []

    def tmpfs(self, path: Path, size: str) -> Path:
        """A small tmpfs at ``path`` (a real full disk when it fills up)."""
        path.mkdir(parents=True, exist_ok=True)
        self._try("-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path))
        self._mounted.append(path)
        return path

    def read_only(self, path: Path) -> None:
        """Make ``path`` a read-only bind mount of itself (root cannot write there either)."""
        self._try("--bind", str(path), str(path))
        self._mounted.append(path)
        self._try("-o", "remount,ro,bind", str(path))

    def writable(self, path: Path) -> None:
        self._try("-o", "remount,rw,bind", str(path))

    def _try(self, *args: str) -> None:
        try:
            _mount(*args)
        except (OSError, FileNotFoundError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"this machine does not allow mounts here ({exc})")

    def undo(self) -> None:
        for path in reversed(self._mounted):
            _umount(path)


@pytest.fixture
def mounts() -> Iterator[Mounts]:
    if os.geteuid() != 0:
        pytest.skip("real tmpfs and read-only mounts need root")
    made = Mounts()
    yield made
    made.undo()


def files_under(root: Path) -> list[Path]:
    """Every file under ``root`` (rotated logs, databases and their -wal/-shm, spills …)."""
    return [p for p in root.rglob("*") if p.is_file()]


def unique(prefix: str) -> str:
    """A secret-looking value no other test plants."""
    return f"{prefix}{uuid.uuid4().hex}{uuid.uuid4().hex[:8]}"


# ---- the engine and its persistence in this process --------------------------------------
class App:
    """A manager plus persistence on a state folder (what the dashboard runs), with the
    notices it tells collected in ``told``."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.settings = Settings.read(None, state_dir=state, demo_speed=50.0, record=False)
        self.manager = SessionManager(self.settings, load_agents(None), SystemClock())
        self.persistence = Persistence(self.manager, self.settings, registry_delay=0.05, history_delay=0.02)
        self.told: list[str] = []
        self.persistence.start()
        self.persistence.on_notice(lambda notice: self.told.append(notice.message))

    async def turn(self, sid: str, prompt: str) -> None:
        before = len(self.manager.session(sid).turns)
        await self.manager.send(sid, prompt)
        await until(lambda: len(self.manager.session(sid).turns) > before)

    def texts(self, sid: str) -> list[str]:
        return [item.text for item in self.manager.history(sid)]

    def notices(self, *fragments: str) -> list[str]:
        """The notices told so far that hold every one of ``fragments``."""
        return [m for m in self.told if all(f in m for f in fragments)]

    async def close(self) -> None:
        await self.manager.shutdown()
        await self.persistence.close()


def db_texts(state: Path, sid: str) -> list[str] | None:
    """What another process reads of a session's rows in ``history.db`` (None: unreadable)."""
    try:
        conn = sqlite3.connect(f"file:{state / 'history.db'}?mode=ro", uri=True)
        try:
            return [r[0] for r in conn.execute("SELECT text FROM items WHERE session_id=? ORDER BY idx", (sid,))]
        finally:
            conn.close()
    except sqlite3.Error:
        return None
