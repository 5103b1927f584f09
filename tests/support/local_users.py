"""Real local users for the tests of what another user of the machine can do.

CI runs as root: :func:`local_user` makes a user with ``useradd`` and removes it with
``userdel`` at the end. :meth:`LocalUser.run` runs a function in a forked child that has
dropped to that user (``setgroups``/``setgid``/``setuid``: the kernel sees that user, no
more), and returns what it returned; :meth:`LocalUser.start` does it in the background (a
listener), bounded by a timeout. The child needs nothing on disk, so the user needs no
access to the interpreter's files.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

_FORK = multiprocessing.get_context("fork")


def _as(uid: int, gid: int, action: Callable[[], Any], out: Connection) -> None:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    try:
        out.send(("ok", action()))
    except BaseException as exc:  # noqa: BLE001 - handed to the test as text
        out.send(("error", f"{type(exc).__name__}: {exc}"))
    out.close()


class Running:
    """A function running as another user in the background."""

    def __init__(self, process: Any, result: Connection) -> None:
        self._process = process
        self._result = result

    def result(self, timeout: float) -> Any:
        """What the function returned (AssertionError with its error when it raised or hung)."""
        if not self._result.poll(timeout):
            self.stop()
            raise AssertionError(f"the other user's process did not finish within {timeout} s")
        status, value = self._result.recv()
        self._process.join(5)
        if status != "ok":
            raise AssertionError(f"the other user's process failed: {value}")
        return value

    def stop(self) -> None:
        if self._process.is_alive():
            self._process.kill()
        self._process.join(5)


@dataclass(frozen=True)
class LocalUser:
    """A real user of this machine (no home, no shell)."""

    name: str
    uid: int
    gid: int

    def start(self, action: Callable[[], Any]) -> Running:
        """Run ``action`` as this user in a forked child, in the background."""
        receive, send = _FORK.Pipe(duplex=False)
        process = _FORK.Process(target=_as, args=(self.uid, self.gid, action, send), daemon=True)
        process.start()
        send.close()
        return Running(process, receive)

    def run(self, action: Callable[[], Any], timeout: float = 15.0) -> Any:
        """Run ``action`` as this user and return what it returned."""
        return self.start(action).result(timeout)


@contextlib.contextmanager
def local_user() -> Iterator[LocalUser]:
    """A new local user for one test, removed at its end (skipped where users cannot be made)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("making a real local user needs root and useradd")
    name = f"ppt{uuid.uuid4().hex[:12]}"
    made = subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", name],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if made.returncode != 0:
        pytest.skip(f"useradd failed here: {made.stderr.strip()}")
    try:
        entry = pwd.getpwnam(name)
        yield LocalUser(name, entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)


@contextlib.contextmanager
def shared_folder() -> Iterator[Path]:
    """A fresh sticky folder every user can write (like /tmp), with a short path; removed at the end."""
    folder = Path(tempfile.mkdtemp(prefix="pp-shared-", dir="/tmp"))
    try:
        folder.chmod(0o1777)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
