"""Private files and folders: the one way the app creates anything on disk.

Everything under the state folder is the user's eyes only (0600 files, 0700 folders)
whatever the umask: ``os.open``/``os.mkdir`` modes can only lose bits to a umask, never
gain them, and folders the app finds already there are narrowed when they are its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """Create ``path`` and any missing parent as 0700 folders; narrow ``path`` itself to 0700.

    Raises OSError when it cannot be created. A folder that exists and is not ours to
    chmod is left as it is (logged): the files in it are still 0600.
    """
    path = Path(path)
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # created meanwhile by another process
            os.mkdir(folder, DIR_MODE)
    try:
        if (os.stat(path).st_mode & 0o777) != DIR_MODE:
            os.chmod(path, DIR_MODE)
    except OSError as exc:
        log.warning("cannot make %s private: %s", path, exc)
    return path


def open_private(path: Path, flags: int = os.O_WRONLY | os.O_CREAT | os.O_APPEND) -> int:
    """Open (creating 0600) and return a file descriptor; an existing file is narrowed to 0600."""
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        if (os.fstat(fd).st_mode & 0o777) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (0600): readers see the old file or the new one, never a mix."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    # The rename itself is durable only once the directory entry is on disk.
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def move_aside(path: Path, why: str) -> Path | None:
    """Rename a broken file (or a folder where a file belongs) to ``<name>.corrupt-<time>-<pid>``.

    Returns the new path, or None when there was nothing to move or it could not be moved.
    """
    target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.error("cannot move the broken %s aside (%s): %s", path, why, exc)
        return None
    log.error("%s was unusable (%s); moved it to %s", path.name, why, target.name)
    return target
