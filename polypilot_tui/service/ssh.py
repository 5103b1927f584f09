"""An engine on another machine, reached over the user's own OpenSSH (issue #14).

:func:`open_tunnel` runs ``<remote polypilot> engine start`` on the target with the user's
``ssh`` (their ~/.ssh/config, agent and keys; we store nothing), reads the one JSON line it
prints (``{"socket": …, "pid": …, "started": …}``), then forwards that remote Unix socket to a
local one in a fresh 0700 folder with ``ssh -N -L``. The dashboard's client then talks HTTP
to :attr:`Tunnel.socket_path` as if the engine ran here; :func:`open_tunnel` returns once
``GET /v1/engine`` has been answered through the forward.

Every ssh runs in batch mode (no password or host-key prompt can hang a dashboard), without
a terminal (its own session, stdin from /dev/null), and every wait is bounded by ``timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import tempfile
import time
from collections.abc import Sequence
from enum import Enum
from types import TracebackType
from typing import Any

from polypilot_tui.agents.leash import leashed
from polypilot_tui.domain import hosts
from polypilot_tui.domain.exit_status import exit_text
from polypilot_tui.infra.private import private_dir
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.service.peer import foreign_peer

log = logging.getLogger(__name__)

MAX_OUTPUT = 64 * 1024
"""Bytes of ``engine start``'s stdout kept (the JSON line is a few dozen)."""
MAX_STDERR = 16 * 1024
"""Bytes of an ssh's stderr kept (its end: the last lines say what went wrong)."""
STDERR_LINES = 5
"""Lines of stderr quoted in an error."""
MAX_SOCKET_PATH = 100
"""Bytes of a Unix socket path (the kernel's limit is 107 with the NUL; macOS's 103)."""
STOP_GRACE = 3.0
"""Seconds an ssh gets to end on SIGTERM before SIGKILL (and again after)."""
_POLL = 0.05
_SAFE_PATH = re.compile(r"/[^\s:\x00-\x1f\x7f]*")
FOLDER_PREFIX = "pp-ssh-"
STALE_AGE = 60.0
"""Seconds a forward's folder must be old before it may be taken for stale (one being set up
by another dashboard has no socket for a moment)."""
CONTROL_LOOKUP = 2.0
"""Seconds ``ssh -G`` (which reads the config only) has to say where the control socket is."""
CONTROL_PROBE = 0.25
"""Seconds a connection master's control socket has to greet before our ssh goes around it."""


class TunnelError(Exception):
    """The remote engine could not be reached; the message names the host and says why."""


def parse_target(target: str) -> tuple[str, int | None]:
    """``[user@]host[:port]`` or an ssh config alias → (ssh's destination, port or None), read
    by the one parser of targets (domain/hosts.py ``parse_target``): nothing that could read as
    an ssh option passes; TunnelError saying what fits otherwise."""
    try:
        parsed = hosts.parse_target(target)
    except hosts.HostError as exc:
        raise TunnelError(str(exc)) from None
    return parsed.destination, parsed.port


def remote_start_command(remote_command: str) -> str:
    """``remote_command engine start`` as one string for the remote shell.

    The command is split like a shell would (so a path with blanks can be quoted) and every
    word quoted again; a leading ``~/`` stays unquoted so the remote shell expands it.
    """
    try:
        words = shlex.split(remote_command)
    except ValueError as exc:
        raise TunnelError(f"the remote command {remote_command!r} cannot be read: {exc}") from None
    if not words:
        raise TunnelError("the remote command is empty")
    first = words[0]
    head = "~/" + shlex.quote(first[2:]) if first.startswith("~/") and first != "~/" else shlex.quote(first)
    return " ".join([head, shlex.join([*words[1:], "engine", "start"])])


class _Sink:
    """Collects a stream: its first ``limit`` bytes (``head``) or its last (tail)."""

    def __init__(self, limit: int, *, head: bool) -> None:
        self.data = b""
        self.overflow = False
        self._limit = limit
        self._head = head

    async def pump(self, stream: asyncio.StreamReader | None) -> None:
        """Read until end of stream, keeping at most ``limit`` bytes."""
        if stream is None:
            return
        while chunk := await stream.read(65536):
            if self._head:
                self.overflow = self.overflow or len(self.data) + len(chunk) > self._limit
                self.data = (self.data + chunk)[: self._limit]
            else:
                self.data = (self.data + chunk)[-self._limit :]

    def last_lines(self) -> str:
        """The last non-blank lines, redacted, for an error message."""
        lines = [line.strip() for line in self.data.decode("utf-8", "replace").splitlines() if line.strip()]
        return REDACTOR.text(" | ".join(lines[-STDERR_LINES:]))


def _said(sink: _Sink) -> str:
    text = sink.last_lines()
    return f": {text}" if text else " (nothing on stderr)"


async def _spawn(argv: Sequence[str], *, stdout: int) -> asyncio.subprocess.Process:
    """``argv`` (an ssh) on the app's leash (agents/leash.py): a session of its own (no
    controlling terminal: nothing can prompt over the dashboard), and ended with the app
    however the app ends — a SIGKILLed dashboard leaves no ssh behind."""
    found = argv[0] if "/" in argv[0] else shutil.which(argv[0])
    if found is None or not os.access(found, os.X_OK):
        raise TunnelError(f"{argv[0]!r} was not found: install OpenSSH's client")
    return await asyncio.create_subprocess_exec(
        *leashed([found, *argv[1:]]),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=stdout,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # the leash's launcher then takes its fast path
    )


async def _end(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process's group (a ProxyCommand too), then SIGKILL; every wait bounded."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), STOP_GRACE)
            return
        except TimeoutError:
            continue
    log.warning("ssh (pid %d) did not end on SIGKILL within %g s", proc.pid, STOP_GRACE)


def _common_options(ssh: str, ssh_options: Sequence[str], port: int | None, timeout: float) -> list[str]:
    # ssh keeps the first value it is given for an option: ours that must hold come before the
    # caller's, the ones a caller may change after.
    argv = [ssh, *_o("BatchMode=yes"), "-T", "-x", "-a", *ssh_options, *_o(f"ConnectTimeout={max(1, int(timeout))}")]
    return argv + (["-p", str(port)] if port is not None else [])


def _o(*settings: str) -> list[str]:
    """``-o`` before each setting."""
    return [word for setting in settings for word in ("-o", setting)]


def _engine_info(host: str, sink: _Sink) -> tuple[str, int, bool]:
    """The remote socket, pid and started flag from ``engine start``'s last line."""
    lines = [line for line in sink.data.decode("utf-8", "replace").splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    try:
        info: Any = json.loads(last)
    except ValueError:
        info = None
    info = info if isinstance(info, dict) else {}
    socket, pid, started = info.get("socket"), info.get("pid"), info.get("started")
    if sink.overflow or not (isinstance(socket, str) and type(pid) is int and isinstance(started, bool)):
        shown = REDACTOR.text(last[:160]) if last else "nothing"
        raise TunnelError(
            f"{host}: `engine start` did not answer the engine's JSON line "
            f'({{"socket": …, "pid": …, "started": …}}); it printed {shown!r}'
        )
    if not _SAFE_PATH.fullmatch(socket) or len(socket.encode()) > MAX_SOCKET_PATH:
        raise TunnelError(
            f"{host}: the engine's socket {socket!r} cannot be forwarded (an absolute path without blanks or ':')"
        )
    return socket, pid, started


async def _start_engine(argv: list[str], host: str, deadline: float, timeout: float) -> tuple[str, int, bool]:
    loop = asyncio.get_running_loop()
    proc = await _spawn(argv, stdout=asyncio.subprocess.PIPE)
    out, err = _Sink(MAX_OUTPUT, head=True), _Sink(MAX_STDERR, head=False)
    pumps = {asyncio.ensure_future(out.pump(proc.stdout)), asyncio.ensure_future(err.pump(proc.stderr))}
    try:
        await asyncio.wait_for(proc.wait(), max(0.0, deadline - loop.time()))
    except TimeoutError:
        raise TunnelError(f"{host}: `engine start` did not finish within {timeout:g} s{_said(err)}") from None
    finally:
        await _end(proc)
        # A ControlPersist master started by the user's config may hold the pipes open: the
        # exit is what counts, the last bytes get a moment.
        _, pending = await asyncio.wait(pumps, timeout=1.0)
        for task in pending:
            task.cancel()
    code = proc.returncode
    if code == 255:
        raise TunnelError(f"cannot reach {host} over ssh{_said(err)}")
    if code == 127:
        hint = "is it installed there?" if "/" in argv[-1].split()[0] else "give its full path (~/.local/bin/…?)"
        raise TunnelError(f"{host}: the remote command was not found (exit 127){_said(err)} — {hint}")
    if code != 0:
        raise TunnelError(f"{host}: `engine start` failed ({exit_text(code)}){_said(err)}")
    return _engine_info(host, out)


def _socket_folder() -> str:
    """A fresh 0700 folder with a short path (Unix socket paths are short), in a place nobody
    else can replace it (NotPrivate otherwise)."""
    for base in (os.environ.get("XDG_RUNTIME_DIR"), "/tmp"):
        if base and len(base) < 60 and os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=base)
            break
    else:
        folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX)
    try:
        return str(private_dir(folder))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _socket_bases() -> list[str]:
    return [base for base in (os.environ.get("XDG_RUNTIME_DIR"), "/tmp", tempfile.gettempdir()) if base]


def _listening(path: str) -> bool | None:
    """True: something accepts on ``path``; False: refused; None: nothing there."""
    probe = socket.socket(socket.AF_UNIX)
    probe.settimeout(CONTROL_PROBE)
    try:
        probe.connect(path)
        return True
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return False
    finally:
        probe.close()


class Control(Enum):
    """What answers on the control socket ssh would use for a host."""

    NONE = "none"
    """No socket there (or none configured, or not this user's): ssh decides as usual."""
    GREETS = "greets"
    """A connection master that says hello: ours may share it."""
    STALE = "stale"
    """The connect is refused: nobody serves it (removed)."""
    SILENT = "silent"
    """It accepts (or is busy) and says nothing in time: maybe hung, maybe only loaded; the
    user's other sessions may still use it, so it is kept and ours go around it."""


def _control_state(path: str) -> Control:
    """Ask the socket at ``path`` for the master's hello within :data:`CONTROL_PROBE` s."""
    probe = socket.socket(socket.AF_UNIX)
    probe.settimeout(CONTROL_PROBE)
    try:
        probe.connect(path)
        return Control.GREETS if probe.recv(4) else Control.SILENT
    except (FileNotFoundError, NotADirectoryError):
        return Control.NONE
    except ConnectionRefusedError:  # ECONNREFUSED: no listener behind it
        return Control.STALE
    except OSError:  # the timeout (no hello), a full backlog: not known dead
        return Control.SILENT
    finally:
        probe.close()


def clean_stale_forwards(bases: Sequence[str] | None = None, now: float | None = None) -> list[str]:
    """Remove the forwards' folders (``pp-ssh-*``) of this user that nobody serves any more
    (their dashboard was killed): no socket answers in them and they are older than
    :data:`STALE_AGE`. Returns the folders removed. Blocking (a few stats): run it off the loop."""
    removed: list[str] = []
    moment = time.time() if now is None else now
    for base in dict.fromkeys(_socket_bases() if bases is None else bases):
        try:
            names = [n for n in os.listdir(base) if n.startswith(FOLDER_PREFIX)]
        except OSError:
            continue
        for name in names:
            folder = os.path.join(base, name)
            try:
                st = os.lstat(folder)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or moment - st.st_mtime < STALE_AGE:
                continue
            if _listening(os.path.join(folder, "engine.sock")):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        log.info("removed %d stale ssh forward folder(s): %s", len(removed), ", ".join(removed))
    return removed


async def check_control_socket(
    ssh: str, destination: str, options: Sequence[str], timeout: float = CONTROL_LOOKUP
) -> Control:
    """The connection master's control socket ssh would use for ``destination`` (``ssh -G``),
    probed: removed only when stale (refused); one that accepts and does not greet (a hung
    master made every ssh after it hang, agent-deck #1421; a loaded one is just slow) is left
    to the user's sessions, and :func:`open_tunnel` runs its ssh without it. Only a socket of
    this user is touched."""
    argv = [ssh, "-G", *options, "--", destination]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
    except OSError:
        return Control.NONE
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        return Control.NONE
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    path = next(
        (
            line.split(" ", 1)[1]
            for line in out.decode(errors="replace").splitlines()
            if line.startswith("controlpath ")
        ),
        "none",
    )
    if path == "none" or not path.startswith("/"):
        return Control.NONE
    try:
        st = os.lstat(path)
    except OSError:
        return Control.NONE
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
        return Control.NONE
    state = await asyncio.to_thread(_control_state, path)
    if state is Control.STALE:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        log.warning("removed the stale ssh control socket %s", path)
    elif state is Control.SILENT:
        log.warning("the ssh control socket %s did not greet: this connection goes without it", path)
    return state


class Tunnel:
    """A local Unix socket forwarded by ``ssh -N -L`` to a remote engine's socket."""

    def __init__(
        self,
        target: str,
        socket_path: str,
        remote_socket: str,
        remote_pid: int,
        started: bool,
        *,
        folder: str,
        proc: asyncio.subprocess.Process,
        stderr: _Sink,
    ) -> None:
        self.target = target
        self.socket_path = socket_path
        self.remote_socket = remote_socket
        self.remote_pid = remote_pid
        self.started = started
        """True when ``engine start`` started the engine (False: one was running)."""
        self._folder = folder
        self._proc = proc
        self._stderr = stderr
        self._pump = asyncio.ensure_future(self._stderr.pump(proc.stderr))
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def pid(self) -> int:
        """The forwarding ssh's process id."""
        return self._proc.pid

    def alive(self) -> bool:
        """Whether the forward runs (False once ssh ended or :meth:`close` was called)."""
        return not self._closed and self._proc.returncode is None

    def last_error(self) -> str:
        """The last lines ssh wrote to stderr (redacted), e.g. why the forward ended."""
        return self._stderr.last_lines()

    async def close(self) -> None:
        """End the forward and remove the local folder. Safe to call again."""
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                await _end(self._proc)
            finally:
                self._pump.cancel()
                shutil.rmtree(self._folder, ignore_errors=True)

    async def __aenter__(self) -> Tunnel:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Tunnel({self.target!r}, {self.socket_path!r} -> {self.remote_socket!r}, alive={self.alive()})"


PROBE = b"GET /v1/engine HTTP/1.0\r\nHost: engine\r\n\r\n"
"""Asked through the forward before it is handed over: the engine answers, not only ssh."""


async def _probe(path: str) -> bool | None:
    """None: nothing listens on ``path`` yet; True: an HTTP answer came back through it.

    The listener must be this user's (our ssh): TunnelError before a byte is sent otherwise."""
    try:
        reader, writer = await asyncio.open_unix_connection(path)
    except (FileNotFoundError, ConnectionRefusedError):
        return None
    try:
        other = foreign_peer(writer.get_extra_info("socket"))
        if other is not None:
            raise TunnelError(
                f"the process listening on {path} ({other.describe()}) is not your ssh; nothing was sent to it"
            )
        writer.write(PROBE)
        await writer.drain()
        return await reader.readexactly(5) == b"HTTP/"
    except (OSError, asyncio.IncompleteReadError):
        return False  # ssh accepted, then the server refused the channel or nothing listened there
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _wait_answering(tunnel: Tunnel, proc: asyncio.subprocess.Process, err: _Sink, deadline: float) -> None:
    """Until the engine answers through the forward; ssh's exit, a refusal or the deadline is an error."""
    loop = asyncio.get_running_loop()
    host = tunnel.target
    exited = asyncio.ensure_future(proc.wait())
    try:
        while True:
            left = deadline - loop.time()
            try:
                answered = await asyncio.wait_for(_probe(tunnel.socket_path), max(left, 0.01))
            except TimeoutError:
                answered = None
            if answered:
                return
            if answered is False:
                raise TunnelError(
                    f"{host}: ssh forwards the socket but the engine at {tunnel.remote_socket} did not answer "
                    f"through it (does the server allow it: sshd's AllowStreamLocalForwarding?){_said(err)}"
                )
            left = deadline - loop.time()
            if left <= 0:
                raise TunnelError(f"{host}: the engine did not answer through the ssh forward in time{_said(err)}")
            done, _ = await asyncio.wait({exited}, timeout=min(_POLL, left))
            if done:
                await asyncio.sleep(0.2)  # its last words
                raise TunnelError(f"{host}: the ssh forward ended ({exit_text(proc.returncode)}){_said(err)}")
    finally:
        exited.cancel()


async def open_tunnel(
    target: str,
    *,
    remote_command: str = "polypilot",
    ssh: str = "ssh",
    ssh_options: Sequence[str] = (),
    timeout: float = 20.0,
) -> Tunnel:
    """Start (or find) the engine on ``target`` and forward its socket here.

    ``target`` is ``[user@]host[:port]`` or an ssh config alias; ``ssh_options`` are extra
    arguments for every ssh (e.g. ``["-F", config]``). The whole call is bounded by
    ``timeout`` seconds. Raises :class:`TunnelError` naming the host and quoting ssh.
    """
    destination, port = parse_target(target)
    command = remote_start_command(remote_command)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    common = _common_options(ssh, ssh_options, port, timeout)
    # No forwardings from the user's config on the first call: they could clash with a
    # session the user has open. Their connection master, when one runs, is used.
    port_option = ["-p", str(port)] if port is not None else []
    control = await check_control_socket(
        common[0], destination, [*ssh_options, *port_option], min(CONTROL_LOOKUP, timeout / 4)
    )
    # A master that did not greet is not ours to remove (the user's sessions may be using it),
    # nor to wait on: this ssh goes around it (first -o wins, so before the user's options).
    around = _o("ControlPath=none") if control is Control.SILENT else []
    start = [common[0], *around, *common[1:], *_o("ClearAllForwardings=yes", "ControlMaster=no")]
    start += ["--", destination, command]
    remote_socket, pid, started = await _start_engine(start, target, deadline, timeout)

    folder = _socket_folder()
    try:
        local = os.path.join(folder, "engine.sock")
        if len(local.encode()) > MAX_SOCKET_PATH or not _SAFE_PATH.fullmatch(local):
            raise TunnelError(f"the local socket path {local!r} is too long or holds blanks or ':'")
        # ControlPath=none: our own connection, so closing it ends exactly this forward.
        forward = [common[0], *_o("ExitOnForwardFailure=yes", "ControlPath=none"), *common[1:], "-N"]
        forward += [*_o("StreamLocalBindUnlink=yes", "ServerAliveInterval=15"), "-L", f"{local}:{remote_socket}"]
        forward += ["--", destination]
        proc = await _spawn(forward, stdout=asyncio.subprocess.DEVNULL)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    err = _Sink(MAX_STDERR, head=False)
    tunnel = Tunnel(target, local, remote_socket, pid, started, folder=folder, proc=proc, stderr=err)
    try:
        await _wait_answering(tunnel, proc, err, deadline)
    except BaseException:
        await tunnel.close()
        raise
    return tunnel
