"""One writer per state folder: an advisory lock held for the app's whole life.

``state_dir/polypilot.lock`` is ``flock``-ed exclusively by the app that saves sessions
there; the file says who holds it (pid, host, since). The kernel drops the lock when that
process ends, however it ends (a SIGKILL included), so a stale lock never blocks a start
and ``polypilot status`` can tell for sure whether an app is running: it only probes the
lock, never takes it for long and never creates anything.

The descriptor is close-on-exec, so agent processes never inherit (and keep) the lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import threading
import time
from pathlib import Path
from typing import ClassVar

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.safe_json import ParseError, dump_json, load_json
from polypilot_tui.infra.private import open_private, private_dir

LOCK_FILE = "polypilot.lock"
ACQUIRE_RETRY = 1.0
"""Seconds to retry a busy lock: ``status`` holds it shared for a moment when it probes."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a state folder's lock, as its lock file says."""

    pid: int | None
    host: str = ""
    since: float | None = None

    def describe(self) -> str:
        """ "pid 123 on box, since 2026-11-23 14:02" (what is known of it)."""
        parts = [f"pid {self.pid}" if self.pid is not None else "an unknown process"]
        if self.host and self.host != socket.gethostname():
            parts.append(f"on {self.host}")
        if self.since is not None:
            parts.append(f"since {time.strftime('%Y-%m-%d %H:%M', time.localtime(self.since))}")
        return ", ".join(parts)


class StateFolderBusy(Exception):
    """Another process holds the state folder's lock."""

    def __init__(self, state_dir: Path, holder: LockHolder) -> None:
        self.state_dir = state_dir
        self.holder = holder
        super().__init__(f"the state folder {state_dir} is in use by another polypilot ({holder.describe()})")


def _read_holder(fd: int) -> LockHolder:
    try:
        raw = os.pread(fd, 4096, 0)
        doc = load_json(raw, LOCK_FILE)
    except (OSError, ParseError):
        return LockHolder(None)
    if not isinstance(doc, dict):
        return LockHolder(None)
    pid, since = doc.get("pid"), doc.get("since")
    return LockHolder(
        pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        str(doc.get("host") or ""),
        float(since) if isinstance(since, (int, float)) and not isinstance(since, bool) else None,
    )


def _try_lock(fd: int, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


class StateLock:
    """The exclusive lock of one state folder, shared by everything in this process that
    writes there (the dashboard's entry point and its persistence take it alike)."""

    _held: ClassVar[dict[Path, StateLock]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, state_dir: Path, fd: int | None) -> None:
        self.state_dir = state_dir
        self.path = state_dir / LOCK_FILE
        self._fd: int | None = fd
        """None: a read-only folder without a lock file (nothing to protect: nothing can be written)."""
        self._users = 1
        self._released = False

    @classmethod
    def acquire(cls, state_dir: Path, retry_for: float = ACQUIRE_RETRY) -> StateLock:
        """Take the lock (or share the one this process holds); raises StateFolderBusy or OSError."""
        state_dir = Path(state_dir).absolute()
        with cls._guard:
            held = cls._held.get(state_dir)
            if held is not None:
                held._users += 1  # noqa: SLF001 - the same class: one lock shared in-process
                return held
            private_dir(state_dir)
            try:
                fd = open_private(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT)
            except OSError as exc:
                if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                    raise
                # A read-only folder: flock works on a read-only descriptor, and with no lock
                # file at all nobody can write there anyway (the stores say so to the user).
                try:
                    fd = open_private(state_dir / LOCK_FILE, os.O_RDONLY)
                except OSError:
                    lock = cls._held[state_dir] = cls(state_dir, None)
                    return lock
            deadline = time.monotonic() + retry_for
            while not _try_lock(fd, fcntl.LOCK_EX):
                if time.monotonic() >= deadline:
                    holder = _read_holder(fd)
                    os.close(fd)
                    raise StateFolderBusy(state_dir, holder)
                time.sleep(0.05)
            record = dump_json({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()})
            with contextlib.suppress(OSError):  # who holds it is a courtesy to the next one
                os.ftruncate(fd, 0)
                os.pwrite(fd, record.encode("utf-8"), 0)
            lock = cls._held[state_dir] = cls(state_dir, fd)
            return lock

    def release(self) -> None:
        """Drop one use; the last one unlocks (the file stays: removing it would race a new holder)."""
        with self._guard:
            if self._released:
                return
            self._users -= 1
            if self._users > 0:
                return
            self._released = True
            self._held.pop(self.state_dir, None)
            fd, self._fd = self._fd, None
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
                os.close(fd)  # closing drops the flock


def lock_holder(state_dir: Path) -> LockHolder | None:
    """Who holds the state folder's lock right now (None: no app is running there).

    Reads only: nothing is created, and the shared probe lasts microseconds.
    """
    try:
        fd = open_private(Path(state_dir) / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None
    try:
        if _try_lock(fd, fcntl.LOCK_SH):
            return None  # nobody holds it exclusively (the close below releases our probe)
        return _read_holder(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
