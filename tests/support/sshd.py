"""A real OpenSSH server on 127.0.0.1 for the remote-attach tests, with throwaway keys.

:class:`Sshd` writes everything into one short temporary folder: a host key, a user key that
is authorized and one that is not, an ``sshd_config`` (127.0.0.1 only, keys only, no PAM)
and client configs for ``ssh -F``. The server runs ``sshd -D -e`` under ``timeout`` (it can
never outlive :data:`LIFETIME`) and :meth:`Sshd.stop` ends it and its sessions.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from tests.support.waiting import until_blocking

LIFETIME = 600
"""Seconds after which the server is killed whatever the test does."""
ALIAS = "testhost"
"""The ssh config alias the client configs give the server."""


def sshd_binary() -> str | None:
    """Debian's sshd, or one on PATH."""
    if os.access("/usr/sbin/sshd", os.X_OK):
        return "/usr/sbin/sshd"
    return shutil.which("sshd")


def missing_tools() -> list[str]:
    """What the tests need and this machine lacks."""
    missing = [] if sshd_binary() else ["sshd (openssh-server)"]
    return missing + [tool for tool in ("ssh", "ssh-keygen", "timeout") if shutil.which(tool) is None]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _children(pid: int) -> list[int]:
    """The process ids whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "polypilot-test", "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=30,
    )


class Sshd:
    """``with Sshd() as server:`` → ``server.client_config`` for ``ssh -F`` and ``server.port``.

    ``extra_config``: sshd_config lines that come first (sshd keeps an option's first value).
    """

    def __init__(self, extra_config: str = "") -> None:
        # Short: the tests' Unix sockets live under it (paths are limited to ~107 bytes).
        self.folder = Path(tempfile.mkdtemp(prefix="pp-sshd-", dir="/tmp"))
        self.user = getpass.getuser()
        self.port = 0
        self.client_config = self.folder / "ssh_config"
        """Logs in with the authorized key."""
        self.wrong_key_config = self.folder / "ssh_config_wrong_key"
        """Offers only a key the server does not know."""
        self.log = self.folder / "sshd.log"
        self._extra = extra_config
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Keys, configs and a listening server (a few tries should the free port be taken)."""
        for name in ("host_key", "user_key", "other_key"):
            _keygen(self.folder / name)
        (self.folder / "home").mkdir(mode=0o700, exist_ok=True)
        (self.folder / "authorized_keys").write_bytes((self.folder / "user_key.pub").read_bytes())
        if not os.path.isdir("/run/sshd"):  # privilege separation folder, absent until a first run
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        for _ in range(3):
            self.port = _free_port()
            self._write_server_config()
            self._write_client_config(self.client_config, self.folder / "user_key")
            self._write_client_config(self.wrong_key_config, self.folder / "other_key")
            if self._launch():
                return
        raise RuntimeError(f"sshd did not start; its log:\n{self.log.read_text(errors='replace')[-2000:]}")

    def restart(self) -> None:
        """Listen again on the same port with the same keys (after :meth:`stop`): the host is back."""
        if not self._launch():
            raise RuntimeError(f"sshd did not start again; its log:\n{self.log.read_text(errors='replace')[-2000:]}")

    def _write_server_config(self) -> None:
        f = self.folder
        (f / "sshd_config").write_text(
            f"{self._extra}\nPort {self.port}\n"
            "ListenAddress 127.0.0.1\n"
            f"HostKey {f / 'host_key'}\n"
            f"PidFile {f / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {f / 'authorized_keys'}\n"
            f"AllowUsers {self.user}\n"
            "StrictModes no\nUsePAM no\n"
            "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\nPermitTTY no\nX11Forwarding no\n"
            "AllowStreamLocalForwarding yes\nAllowAgentForwarding no\n"
            "MaxStartups 50\nLogLevel VERBOSE\n"
            # The login shell reads the account's ~/.bashrc, whose tools (pyenv's rehash lock,
            # seen stale on fresh machines) can hang every session: the tests log in to an
            # empty home of their own instead.
            f"SetEnv HOME={f / 'home'}\n"
        )

    def _write_client_config(self, path: Path, key: Path) -> None:
        f = self.folder
        path.write_text(
            f"Host {ALIAS}\n    HostName 127.0.0.1\n    Port {self.port}\n"
            "Host *\n"
            f"    User {self.user}\n    IdentityFile {key}\n    IdentitiesOnly yes\n    IdentityAgent none\n"
            f"    UserKnownHostsFile {f / 'known_hosts'}\n    GlobalKnownHostsFile /dev/null\n"
            "    StrictHostKeyChecking accept-new\n    LogLevel ERROR\n"
        )

    def _launch(self) -> bool:
        sshd = sshd_binary()
        assert sshd is not None
        with self.log.open("ab") as log:
            self._proc = subprocess.Popen(
                ["timeout", "-k", "5", str(LIFETIME), sshd, "-D", "-e", "-f", str(self.folder / "sshd_config")],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        proc = self._proc

        def answers() -> bool:
            if proc.poll() is not None:
                raise AssertionError("sshd exited")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                return conn.recv(64).startswith(b"SSH-2.0")
            return False

        try:
            return until_blocking(answers, 10, "sshd to answer")
        except AssertionError:
            self.stop()
            return False

    def stop(self) -> None:
        """End the server and every session it started (its process group)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # Each login session is a process group of its own under the listener: end them too,
        # so a tunnel a failed test left open cannot keep a session alive.
        listeners = _children(proc.pid)
        for pid in [child for listener in listeners for child in _children(listener)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def __enter__(self) -> Sshd:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server and remove its folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
