"""Private files and folders: the one way the app creates, opens and checks anything on disk.

Everything the app keeps is the user's eyes only (0600 files, 0700 folders) whatever the
umask: ``os.open``/``os.mkdir`` modes can only lose bits to a umask, never gain them, and
folders and files the app finds already there are narrowed when they are its own.

No one else in: a folder the app keeps things in must be the user's own and writable by
nobody else, and every folder above it must let nobody else replace it (owned by the user
or root, and writable by others only when sticky, like /tmp). Anything else is refused with
:class:`NotPrivate`, whose message names the path, what is wrong and how to fix it: through
a folder another user made, that user could read what we write, swap a file for a link to
one of ours, or listen on the engine's socket. Files are opened without following a link
(``O_NOFOLLOW``) and must be the user's own regular files.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from polypilot_tui.domain.safe_json import ParseError

if TYPE_CHECKING:
    import logging


def _log() -> logging.Logger:
    """This module's logger: ``logging`` is imported when something is to be said (a headless
    run reads its settings through here before it spawns its agent, ~3 ms earlier without it)."""
    import logging

    return logging.getLogger(__name__)


FILE_MODE = 0o600
DIR_MODE = 0o700
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_ROOT = 0


class NotPrivate(PermissionError):
    """A folder, file or socket the app would use is another user's, or others can write it.

    Its message names the path, what is wrong and how to fix it."""

    def __init__(self, path: Path | str, problem: str, fix: str) -> None:
        super().__init__(f"{path} {problem}: {fix}")
        self.path = Path(path)


def user_name(uid: int) -> str:
    """``alice (uid 1001)``, or ``uid 1001`` for a user the system does not name."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _mode(st: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(st.st_mode):o}"


def _own_folder_problem(path: Path, st: os.stat_result) -> NotPrivate | None:
    """Why ``path`` (a folder the app keeps things in) is not private, or None."""
    me = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        return NotPrivate(path, "is not a folder", "remove it, or choose another folder")
    if st.st_uid != me:
        return NotPrivate(
            path,
            f"belongs to {user_name(st.st_uid)}, not to you ({user_name(me)}); that user could read and "
            "replace what polypilot keeps there",
            "have it removed (by that user or root), or choose a folder of your own",
        )
    if st.st_mode & _OTHERS_WRITE:
        return NotPrivate(
            path,
            f"can be written by other users ({_mode(st)}); they could have put links or sockets in it",
            f"check what is in it, then `chmod 700 {path}`",
        )
    return None


def _parent_problem(path: Path, st: os.stat_result, below: Path, writable: int) -> NotPrivate | None:
    """Why ``path`` (a folder above ``below``) lets someone else replace ``below``, or None
    (``writable``: the write bits that let others in, unless the folder is sticky)."""
    me = os.geteuid()
    if stat.S_ISLNK(st.st_mode):
        if st.st_uid in (me, _ROOT):
            return None
        return NotPrivate(
            path,
            f"is a link made by {user_name(st.st_uid)} (on the way to {below}); that user can point it elsewhere",
            "remove it, or choose a folder that is not reached through it",
        )
    if st.st_uid not in (me, _ROOT):
        return NotPrivate(
            path,
            f"(above {below}) belongs to {user_name(st.st_uid)}; that user could replace what is in it",
            "choose a folder outside it",
        )
    if st.st_mode & writable and not st.st_mode & stat.S_ISVTX:
        return NotPrivate(
            path,
            f"(above {below}) can be written by other users and is not sticky ({_mode(st)}); "
            "anyone there could replace what is in it",
            f"`chmod o-w,g-w {path}` (or `chmod +t`), or choose a folder outside it",
        )
    return None


def _prefixes(path: Path) -> list[Path]:
    """``/``, ``/a``, ``/a/b`` … ``path`` (absolute, lexical)."""
    return [*reversed(path.parents), path]


def _check_way(path: Path, writable: int) -> os.stat_result | None:
    """Raise NotPrivate when a folder above ``path`` (as written, and as its links resolve) is
    not this user's or root's, or has a bit of ``writable`` and is not sticky, or when a link
    on the way (``path`` included) is another user's. ``path``'s stat, None when it is missing."""
    for folder in _prefixes(path)[:-1]:
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            return None  # the rest is made by us
        problem = _parent_problem(folder, st, path, writable)
        if problem is None and stat.S_ISLNK(st.st_mode):
            problem = _parent_problem(folder, os.stat(folder), path, writable)  # the folder the link leads to
        if problem is not None:
            raise problem
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    real = Path(os.path.realpath(path))
    if real != path:  # reached through links: the folders they lead through count too
        for folder in _prefixes(real)[:-1]:
            problem = _parent_problem(folder, os.stat(folder), path, writable)
            if problem is not None:
                raise problem
        link = os.lstat(path)
        if stat.S_ISLNK(link.st_mode) and link.st_uid not in (os.geteuid(), _ROOT):
            raise NotPrivate(
                path,
                f"is a link made by {user_name(link.st_uid)}; that user can point it elsewhere",
                "remove it, or use one of your own",
            )
    return st


def check_private_dir(path: Path | str) -> Path:
    """Raise :class:`NotPrivate` unless ``path`` is safe to keep private things in.

    ``path`` itself (when it exists) must be a folder of this user that nobody else can write;
    every folder above it, as written and as its links resolve, must be this user's or root's
    and writable by others only when sticky; a link on the way must be this user's or root's.
    Nothing is created or changed. Returns ``path``.
    """
    path = Path(os.path.abspath(path))
    st = _check_way(path, _OTHERS_WRITE)
    problem = _own_folder_problem(path, st) if st is not None else None
    if problem is not None:
        raise problem
    return path


def check_trusted_file(path: Path | str) -> Path:
    """Raise :class:`NotPrivate` when another user could have written ``path``, a file whose
    contents decide what polypilot runs (the settings, the agents file); FileNotFoundError
    when it is missing.

    It and every folder above it must be this user's or root's and not writable by all (a
    folder only when not sticky). Group write is accepted here, unlike for what the app makes:
    these are the user's own files, and with a user-private group (umask 002) that group is
    the user.
    """
    path = Path(os.path.abspath(path))
    st = _check_way(path, stat.S_IWOTH)
    if st is None:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
    if st.st_uid not in (os.geteuid(), _ROOT):
        raise NotPrivate(
            path,
            f"belongs to {user_name(st.st_uid)}, not to you; it says what polypilot runs",
            "use a file of your own",
        )
    if st.st_mode & stat.S_IWOTH:
        raise NotPrivate(path, f"can be written by every user ({_mode(st)})", f"`chmod o-w {path}`")
    return path


def private_dir(path: Path | str) -> Path:
    """Create ``path`` and any missing parent as 0700 folders; narrow ``path`` itself to 0700.

    Raises :class:`NotPrivate` when it, or a folder above it, is not safe (see
    :func:`check_private_dir`), OSError when it cannot be created.
    """
    path = Path(path)
    missing = []
    probe = Path(os.path.abspath(path))
    while not os.path.lexists(probe) and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    check_private_dir(path)  # the folders above it, before anything is made under them
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile: the check below says by whom
            os.mkdir(folder, DIR_MODE)
    check_private_dir(path)
    try:
        if (os.stat(path).st_mode & 0o777) != DIR_MODE:
            os.chmod(path, DIR_MODE)
    except OSError as exc:  # ours and nobody else can write it: a read-only mount, say
        _log().warning("cannot make %s private: %s", path, exc)
    return path


def open_private(path: Path | str, flags: int = os.O_WRONLY | os.O_CREAT | os.O_APPEND) -> int:
    """Open (creating 0600) and return a file descriptor, never through a link.

    The file must be a regular file of this user (else :class:`NotPrivate`); one opened for
    writing is narrowed to 0600. ``os.O_RDONLY`` reads an existing file the same safe way.
    """
    try:
        # O_NONBLOCK: a FIFO put in a file's place cannot hang the open (refused below).
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            raise NotPrivate(
                path,
                f"is a link (to {os.readlink(path)}); polypilot never writes or reads through one",
                "remove the link",
            ) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotPrivate(path, "is not a regular file", "remove it")
        if st.st_uid != os.geteuid():
            raise NotPrivate(path, f"belongs to {user_name(st.st_uid)}, not to you", "remove it")
        os.set_blocking(fd, True)
        if flags & os.O_ACCMODE != os.O_RDONLY and (st.st_mode & 0o777) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_private(path: Path | str, max_bytes: int) -> bytes:
    """The whole of an existing private file (see :func:`open_private`); ParseError when it is
    larger than ``max_bytes`` (nothing more is read then); NotPrivate when others may write it
    (the app made it 0600: someone else changed it, or could have)."""
    with os.fdopen(open_private(path, os.O_RDONLY), "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_mode & _OTHERS_WRITE:
            raise NotPrivate(path, f"can be written by others ({_mode(st)})", f"`chmod go-w {path}` if it is yours")
        if st.st_size > max_bytes:
            raise ParseError(str(path), None, f"larger than {max_bytes:,} bytes")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew while read
        raise ParseError(str(path), None, f"larger than {max_bytes:,} bytes")
    return data


SQLITE_SUFFIXES = ("", "-wal", "-shm")
"""A SQLite database in WAL mode is three files: the database, its write-ahead log, its index."""


def private_database(path: Path | str, *, create: bool) -> None:
    """Make sure a SQLite database and its -wal and -shm files are regular 0600 files of this
    user, never links, before SQLite opens them by name (it follows links, and makes -wal and
    -shm itself). ``create``: make the missing ones (empty: SQLite takes an empty log and
    index as none); else only those there are checked. NotPrivate or OSError otherwise."""
    for suffix in SQLITE_SUFFIXES:
        name = f"{path}{suffix}"
        try:
            os.close(open_private(name, os.O_RDWR | os.O_CREAT) if create else open_private(name, os.O_RDONLY))
        except FileNotFoundError:
            if not suffix:
                raise


def check_private_socket(path: Path | str) -> Path:
    """Raise :class:`NotPrivate` unless ``path`` is a socket of this user in a private folder
    (FileNotFoundError when nothing is there). Whoever listens on it is checked on connect."""
    path = Path(path)
    check_private_dir(path.parent)
    st = os.lstat(path)
    if not stat.S_ISSOCK(st.st_mode):
        raise NotPrivate(path, "is not a socket", "remove it (no engine runs there)")
    if st.st_uid != os.geteuid():
        raise NotPrivate(
            path,
            f"belongs to {user_name(st.st_uid)}, not to you; it is not your engine and was not used",
            "have it removed (by that user or root), or use a state folder of your own",
        )
    return path


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (0600): readers see the old file or the new one, never a mix.

    The temporary file is made new (``O_EXCL``: never a link's target) and renamed over
    ``path``, which replaces whatever entry was there (a link itself, not what it points to).
    """
    import tempfile  # writing only: not on a headless run's way to its agent's spawn

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
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def move_aside(path: Path, why: str) -> Path | None:
    """Rename a broken file (or a folder where a file belongs) to ``<name>.corrupt-<time>-<pid>``.

    The entry itself is renamed (a link stays a link). Returns the new path, or None when
    there was nothing to move or it could not be moved.
    """
    target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        _log().error("cannot move the broken %s aside (%s): %s", path, why, exc)
        return None
    _log().error("%s was unusable (%s); moved it to %s", path.name, why, target.name)
    return target
