"""Open a file beneath a folder without following a link on the way.

For files written or read on behalf of a process that may change the folder meanwhile (a
sandboxed agent asks us to write ``dir/file`` and swaps ``dir`` for a link to the user's
``~/.config`` between our check and our open): each part of the path is opened from the one
before it (``dir_fd``) with ``O_NOFOLLOW``, so a link anywhere on the way is refused
(:class:`LinkOnTheWay`) instead of followed.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LinkOnTheWay(OSError):
    """A part of the path is a link (or not a folder where one is needed)."""


def open_beneath(root: Path, target: Path, flags: int, *, make_folders: bool = False, mode: int = 0o644) -> int:
    """An fd of ``target`` (a path under ``root``, both absolute and resolved), opened with
    ``flags`` and no link followed below ``root``; missing folders are made (0755) when
    ``make_folders``. :class:`LinkOnTheWay` when a part is a link; other errors as ``os.open``."""
    parts = target.relative_to(root).parts
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is the folder itself", str(target))
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            if make_folders:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                inner = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise LinkOnTheWay(exc.errno, "a part of the path is a link or not a folder", str(target)) from None
                raise
            os.close(fd)
            fd = inner
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise LinkOnTheWay(exc.errno, "the file is a link", str(target)) from None
            raise
    finally:
        os.close(fd)
