"""The remote attach over real OpenSSH: an sshd on 127.0.0.1 started here, throwaway keys.

The "remote polypilot" is tests/support/fake_engine.py behind a script in a folder with a
blank in its name (the remote command is quoted for the remote shell); it honours the
``engine start`` contract until the real engine lands. Each test gets its own engine socket
and kills the engine it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from polypilot_tui.service.ssh import Tunnel, TunnelError, open_tunnel
from tests.support import fake_engine
from tests.support.sshd import ALIAS, Sshd, missing_tools

TIMEOUT = 15.0


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    """One sshd per module (per xdist worker); skipped where OpenSSH is missing, never on CI."""
    missing = missing_tools()
    if missing:
        message = f"{', '.join(missing)} not installed (apt-get install openssh-server)"
        if _in_ci():
            pytest.fail(f"{message} (CI=true: the remote-attach tests must run)")
        pytest.skip(message)
    with Sshd() as server:
        yield server


class RemotePolypilot:
    """A ``polypilot`` for the sshd's login sessions, with its own engine socket."""

    def __init__(self, sshd: Sshd) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="t", dir=sshd.folder))
        self.socket = str(self.folder / "engine.sock")
        self.pidfile = self.folder / "engine.pid"
        script = self.folder / "remote bin" / "polypilot"
        script.parent.mkdir()
        script.write_text(
            "#!/bin/sh\n"
            '[ "$1 $2" = "engine start" ] || { echo "usage: polypilot engine start" >&2; exit 2; }\n'
            f"exec {shlex.quote(sys.executable)} {shlex.quote(fake_engine.__file__)} start "
            f"{shlex.quote(self.socket)} {shlex.quote(str(self.pidfile))}\n"
        )
        script.chmod(0o755)
        self.command = shlex.quote(str(script))
        """The remote command as a user would write it (quoted: its path has a blank)."""

    def stop(self) -> None:
        """Kill the engine if one was started."""
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            os.kill(int(self.pidfile.read_text()), signal.SIGKILL)


@pytest.fixture
def remote(sshd: Sshd) -> Iterator[RemotePolypilot]:
    """This test's remote polypilot; its engine is killed when the test ends."""
    polypilot = RemotePolypilot(sshd)
    try:
        yield polypilot
    finally:
        polypilot.stop()


async def engine_answer(tunnel: Tunnel) -> dict[str, object]:
    """GET /v1/engine through the tunnel's local socket."""
    async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=tunnel.socket_path), timeout=5) as client:
        response = await client.get("http://engine/v1/engine")
    response.raise_for_status()
    answer: dict[str, object] = response.json()
    return answer


def gone(pid: int) -> bool:
    """Whether no process has this id."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_attach_starts_the_engine_then_finds_it_and_close_ends_the_forward(
    sshd: Sshd, remote: RemotePolypilot
) -> None:
    options = ["-F", str(sshd.client_config)]
    began = time.monotonic()
    first = await open_tunnel(ALIAS, remote_command=remote.command, ssh_options=options, timeout=TIMEOUT)
    opened = time.monotonic() - began
    try:
        assert first.started and first.alive()
        assert first.remote_socket == remote.socket
        assert await engine_answer(first) == {"engine": "fake", "pid": first.remote_pid}
        # The same engine by user@host:port: found running, not started twice.
        second = await open_tunnel(
            f"{sshd.user}@127.0.0.1:{sshd.port}", remote_command=remote.command, ssh_options=options, timeout=TIMEOUT
        )
        async with second:
            assert not second.started and second.remote_pid == first.remote_pid
            assert second.socket_path != first.socket_path
            assert await engine_answer(second) == await engine_answer(first)
        assert not second.alive() and gone(second.pid)
    finally:
        await first.close()
    assert not first.alive()
    assert gone(first.pid)
    assert not Path(first.socket_path).parent.exists()
    with pytest.raises(httpx.TransportError):
        await engine_answer(first)
    assert not gone(first.remote_pid)  # the engine outlives the tunnel: sessions outlive the terminal
    assert opened < TIMEOUT
    print(f"open_tunnel over real ssh: {opened:.2f} s")


async def test_the_wrong_key_is_a_clear_error_within_the_timeout(sshd: Sshd, remote: RemotePolypilot) -> None:
    began = time.monotonic()
    with pytest.raises(TunnelError, match=rf"cannot reach {ALIAS} over ssh: .*Permission denied \(publickey\)"):
        await open_tunnel(
            ALIAS, remote_command=remote.command, ssh_options=["-F", str(sshd.wrong_key_config)], timeout=TIMEOUT
        )
    assert time.monotonic() - began < TIMEOUT
    assert not remote.pidfile.exists()  # nothing ran on the server


async def test_an_unknown_host_key_fails_instead_of_prompting(sshd: Sshd, remote: RemotePolypilot) -> None:
    strict = ["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=/dev/null", "-F", str(sshd.client_config)]
    with pytest.raises(TunnelError, match="Host key verification failed"):
        await open_tunnel(ALIAS, remote_command=remote.command, ssh_options=strict, timeout=TIMEOUT)


@pytest.mark.parametrize(
    ("command", "said"),
    [("/nonexistent/polypilot", "No such file or directory"), ("polypilot-not-installed", "command not found")],
)
async def test_a_missing_remote_command_is_a_clear_error(sshd: Sshd, command: str, said: str) -> None:
    with pytest.raises(TunnelError, match=rf"{ALIAS}: the remote command was not found \(exit 127\): .*{said}"):
        await open_tunnel(
            ALIAS,
            remote_command=command,
            ssh_options=["-F", str(sshd.client_config)],
            timeout=TIMEOUT,
        )


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo hello", r"did not answer the engine's JSON line .* it printed 'hello engine start'"),
        ("sh -c 'echo the state folder is locked >&2; exit 3'", r"failed \(exit code 3\): the state folder is locked"),
    ],
    ids=["garbage", "engine-refuses"],
)
async def test_a_remote_command_that_breaks_the_contract_is_a_clear_error(
    sshd: Sshd, command: str, expected: str
) -> None:
    with pytest.raises(TunnelError, match=expected):
        await open_tunnel(ALIAS, remote_command=command, ssh_options=["-F", str(sshd.client_config)], timeout=TIMEOUT)


async def test_a_server_that_forbids_forwarding_is_a_clear_error() -> None:
    with Sshd(extra_config="AllowTcpForwarding no") as strict:  # many company servers
        forbidden = RemotePolypilot(strict)
        try:
            with pytest.raises(TunnelError, match=r"ssh forwards the socket but the engine at .* did not answer"):
                await open_tunnel(
                    ALIAS,
                    remote_command=forbidden.command,
                    ssh_options=["-F", str(strict.client_config)],
                    timeout=TIMEOUT,
                )
            assert forbidden.pidfile.exists()  # the engine was started; only the forward was refused
        finally:
            forbidden.stop()


async def test_the_tunnel_reports_a_lost_server() -> None:
    with Sshd() as own:  # its own server: this test stops it under the tunnel
        remote = RemotePolypilot(own)
        try:
            tunnel = await open_tunnel(
                ALIAS, remote_command=remote.command, ssh_options=["-F", str(own.client_config)], timeout=TIMEOUT
            )
            try:
                assert tunnel.alive()
                own.stop()
                end = time.monotonic() + 10
                while tunnel.alive() and time.monotonic() < end:
                    await asyncio.sleep(0.05)
                assert not tunnel.alive()
                await asyncio.sleep(0.2)
                # ssh says why ("Connection … closed by remote host" or "… Broken pipe").
                assert tunnel.last_error()
            finally:
                await tunnel.close()
            assert gone(tunnel.pid)
            assert not Path(tunnel.socket_path).parent.exists()
        finally:
            remote.stop()
