"""open_tunnel against a scripted ``ssh``: the exact command lines, and every way it can fail.

The fake ssh is a small Python script standing in for OpenSSH: it records its argv, answers
``engine start`` as the test says, and for ``-N -L local:remote`` listens on the local socket
until it is terminated. The real OpenSSH path is tests/e2e/test_ssh_tunnel.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from polypilot_tui.service.ssh import (
    Control,
    TunnelError,
    check_control_socket,
    open_tunnel,
    parse_target,
    remote_start_command,
)

GOOD = '{"socket": "/run/user/1000/polypilot/engine.sock", "pid": 4242, "started": true}'

FAKE_SSH = r"""#!{python}
import json, os, signal, socket, sys, time
if "-G" in sys.argv:  # the configuration ssh would use: its connection master's socket, or none
    print("controlpath {control}")
    sys.exit(0)
log = {log!r}
with open(log, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
with open(log + ".pids", "a") as f:
    f.write(f"{{os.getpid()}}\n")
args = sys.argv[1:]
if "-N" in args:
    mode = {forward!r}
    if mode == "die":
        sys.stderr.write("bind: Address already in use\nchannel_setup_fwd_listener_streamlocal: cannot listen\n")
        sys.exit(255)
    local = args[args.index("-L") + 1].split(":")[0]
    server = socket.socket(socket.AF_UNIX)
    server.bind(local)
    server.listen()
    end = time.monotonic() + 60
    server.settimeout(1)
    while time.monotonic() < end:
        try:
            conn = server.accept()[0]
        except TimeoutError:
            continue
        if mode == "listen":
            conn.recv(1000)
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{{}}")
        conn.close()
    sys.exit(0)
code, out, err = {start!r}
if code == "hang":
    time.sleep(60)
sys.stdout.write(out)
sys.stderr.write(err)
sys.exit(code)
"""

FakeSsh = Callable[..., Path]


@pytest.fixture
def fake_ssh(tmp_path: Path) -> FakeSsh:
    """``fake_ssh(start=(code, stdout, stderr), forward=…)`` → the script's path.

    ``forward``: "listen" answers HTTP on the local socket, "mute" accepts and closes (a
    server that refuses the channel), "die" exits 255 at once.
    """

    def make(
        start: tuple[int | str, str, str] = (0, GOOD + "\n", ""), forward: str = "listen", control: str = "none"
    ) -> Path:
        path = tmp_path / "ssh"
        log = str(tmp_path / "argv.log")
        text = FAKE_SSH.format(python=sys.executable, log=log, start=start, forward=forward, control=control)
        path.write_text(text)
        path.chmod(0o755)
        return path

    return make


def calls(tmp_path: Path) -> list[list[str]]:
    """Every argv the fake ssh was run with, in order."""
    return [json.loads(line) for line in (tmp_path / "argv.log").read_text().splitlines()]


def pids_gone(tmp_path: Path) -> bool:
    """Whether every process the fake ssh started has ended."""
    for line in (tmp_path / "argv.log.pids").read_text().split():
        try:
            os.kill(int(line), 0)
        except ProcessLookupError:
            continue
        return False
    return True


def option(argv: list[str], name: str) -> bool:
    """Whether ``-o name`` is among the arguments."""
    return any(a == "-o" and b == name for a, b in zip(argv, argv[1:], strict=False))


async def test_start_then_forward_with_the_exact_commands(tmp_path: Path, fake_ssh: FakeSsh) -> None:
    ssh = fake_ssh()
    tunnel = await open_tunnel(
        "alice@devbox:2222",
        remote_command="'~/my bin/polypilot' --state /srv/x",
        ssh=str(ssh),
        ssh_options=["-F", "/dev/null"],
        timeout=10,
    )
    try:
        assert tunnel.alive()
        assert tunnel.remote_socket == "/run/user/1000/polypilot/engine.sock"
        assert (tunnel.remote_pid, tunnel.started, tunnel.target) == (4242, True, "alice@devbox:2222")
        folder = Path(tunnel.socket_path).parent
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_ISSOCK(Path(tunnel.socket_path).stat().st_mode)
        assert len(tunnel.socket_path.encode()) <= 100
        start, forward = calls(tmp_path)
        # The remote shell gets one string: the command re-quoted, ~ left to expand.
        assert start[-3:] == ["--", "alice@devbox", "~/'my bin/polypilot' --state /srv/x engine start"]
        for argv in (start, forward):
            assert option(argv, "BatchMode=yes")
            assert argv[argv.index("-p") + 1] == "2222"
            assert argv[argv.index("-F") + 1] == "/dev/null"
            assert argv.index("BatchMode=yes") < argv.index("-F")  # ssh keeps the first value: ours
        assert "-N" in forward and forward[-2:] == ["--", "alice@devbox"]
        for name in ("ExitOnForwardFailure=yes", "StreamLocalBindUnlink=yes", "ServerAliveInterval=15"):
            assert option(forward, name), name
        assert forward[forward.index("-L") + 1] == f"{tunnel.socket_path}:{tunnel.remote_socket}"
    finally:
        await tunnel.close()
    assert not tunnel.alive()
    assert not folder.exists()
    await asyncio.sleep(0)
    assert pids_gone(tmp_path)
    await tunnel.close()  # again: nothing happens


async def test_remote_command_missing_is_exit_127(fake_ssh: FakeSsh) -> None:
    ssh = fake_ssh(start=(127, "", "bash: line 1: polypilot: command not found\n"))
    with pytest.raises(TunnelError) as info:
        await open_tunnel("devbox", ssh=str(ssh), timeout=10)
    message = str(info.value)
    assert "devbox" in message and "exit 127" in message and "polypilot: command not found" in message


async def test_ssh_failure_names_the_host_and_quotes_stderr(fake_ssh: FakeSsh) -> None:
    err = "".join(f"debug line {n}\n" for n in range(20)) + "alice@devbox: Permission denied (publickey).\n"
    ssh = fake_ssh(start=(255, "", err))
    with pytest.raises(TunnelError, match=r"cannot reach devbox over ssh: .*Permission denied \(publickey\)") as info:
        await open_tunnel("devbox", ssh=str(ssh), timeout=10)
    assert "debug line 0" not in str(info.value)  # the last lines only


@pytest.mark.parametrize(
    "out",
    [
        "",
        "hello from .bashrc\n",
        '{"socket": "/s.sock", "pid": true, "started": true}\n',
        '{"socket": "relative.sock", "pid": 1, "started": true}\n',
        '{"socket": "/a:b.sock", "pid": 1, "started": false}\n',
        '["/s.sock", 1, true]\n',
        "x" * 200_000 + "\n" + GOOD + "\n",
    ],
    ids=["nothing", "text", "bool-pid", "relative", "colon", "list", "too-long"],
)
async def test_output_that_is_not_the_engine_line_is_refused(fake_ssh: FakeSsh, out: str) -> None:
    ssh = fake_ssh(start=(0, out, ""))
    with pytest.raises(TunnelError, match="devbox"):
        await open_tunnel("devbox", ssh=str(ssh), timeout=10)


async def test_a_chatty_login_shell_before_the_line_is_fine(fake_ssh: FakeSsh) -> None:
    ssh = fake_ssh(start=(0, "Welcome!\n" + GOOD + "\n\n", ""))
    async with await open_tunnel("devbox", ssh=str(ssh), timeout=10) as tunnel:
        assert tunnel.remote_pid == 4242


async def test_a_hanging_ssh_is_killed_at_the_timeout(tmp_path: Path, fake_ssh: FakeSsh) -> None:
    ssh = fake_ssh(start=("hang", "", ""))
    began = time.monotonic()
    with pytest.raises(TunnelError, match=r"did not finish within 1\.5 s"):
        await open_tunnel("devbox", ssh=str(ssh), timeout=1.5)
    assert time.monotonic() - began < 6
    assert pids_gone(tmp_path)


async def test_a_forward_that_dies_is_reported_with_its_stderr(tmp_path: Path, fake_ssh: FakeSsh) -> None:
    ssh = fake_ssh(forward="die")
    with pytest.raises(
        TunnelError, match=r"devbox: the ssh forward ended \(exit code 255\): bind: Address already in use"
    ):
        await open_tunnel("devbox", ssh=str(ssh), timeout=10)
    forward = calls(tmp_path)[-1]
    # Its folder went with it (this one's: others' tunnels may come and go meanwhile).
    assert not Path(forward[forward.index("-L") + 1].split(":")[0]).parent.exists()
    assert pids_gone(tmp_path)


async def test_a_forward_the_server_refuses_is_reported(tmp_path: Path, fake_ssh: FakeSsh) -> None:
    ssh = fake_ssh(forward="mute")
    with pytest.raises(TunnelError, match=r"devbox: ssh forwards the socket but the engine at /run/.* did not answer"):
        await open_tunnel("devbox", ssh=str(ssh), timeout=10)
    assert pids_gone(tmp_path)


async def test_a_missing_ssh_says_so(tmp_path: Path) -> None:
    with pytest.raises(TunnelError, match="was not found"):
        await open_tunnel("devbox", ssh=str(tmp_path / "no-ssh"), timeout=5)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("devbox", ("devbox", None)),
        ("alice@devbox", ("alice@devbox", None)),
        ("alice@10.0.0.2:2222", ("alice@10.0.0.2", 2222)),
        ("[::1]:22", ("::1", 22)),
        ("bob@[fe80::1]", ("bob@fe80::1", None)),
        ("my_box", ("my_box", None)),  # an ssh config alias: `hosts add` takes it as well
        ("bob@my_box:2200", ("bob@my_box", 2200)),
    ],
)
def test_targets(target: str, expected: tuple[str, int | None]) -> None:
    assert parse_target(target) == expected


@pytest.mark.parametrize(
    "target",
    [
        "-oProxyCommand=touch /tmp/x",
        "user@-oProxyCommand=touch /tmp/x",
        "-user@host",
        "_@-o",
        "dev box",
        "",
        "a@",
        "host:0",
        "host:70000",
        "host:x",
        "a@b@c",
        "host\nother",
    ],
)
def test_bad_targets_are_refused(target: str) -> None:
    with pytest.raises(TunnelError):
        parse_target(target)


def test_remote_command_quoting() -> None:
    assert remote_start_command("polypilot") == "polypilot engine start"
    assert remote_start_command("/opt/pp/bin/polypilot") == "/opt/pp/bin/polypilot engine start"
    assert remote_start_command("'/my tools/pp' --x 'a;b'") == "'/my tools/pp' --x 'a;b' engine start"
    assert remote_start_command("~/.local/bin/polypilot") == "~/.local/bin/polypilot engine start"
    assert remote_start_command("polypilot; rm -rf ~") == "'polypilot;' rm -rf '~' engine start"
    with pytest.raises(TunnelError):
        remote_start_command("  ")
    with pytest.raises(TunnelError):
        remote_start_command("'unclosed")


def control_socket(tmp_path: Path, kind: str) -> tuple[Path, socket.socket | None]:
    """A real control socket at a short path: ``greets`` (says hello on accept), ``silent``
    (accepts, says nothing: hung, or a master on a loaded machine) or ``stale`` (bound, its
    listener gone: a connect is refused)."""
    path = tmp_path / f"cm-{kind}"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    if kind == "stale":
        server.close()  # the file stays; nobody listens
        return path, None
    server.listen()
    if kind == "greets":
        server.setblocking(False)
    return path, server


async def test_a_silent_master_is_kept_and_our_ssh_goes_around_it(tmp_path: Path, fake_ssh: FakeSsh) -> None:
    path, server = control_socket(tmp_path, "silent")
    assert server is not None
    try:
        ssh = fake_ssh(control=str(path))
        assert await check_control_socket(str(ssh), "devbox", []) is Control.SILENT
        assert stat.S_ISSOCK(path.stat().st_mode)  # the user's other sessions keep it
        tunnel = await open_tunnel("devbox", ssh=str(ssh), timeout=10)
        await tunnel.close()
        start = calls(tmp_path)[0]
        assert start[:2] == ["-o", "ControlPath=none"]  # first, as the first -o wins over the user's
        assert stat.S_ISSOCK(path.stat().st_mode)
    finally:
        server.close()


async def test_a_stale_control_socket_is_removed(tmp_path: Path, fake_ssh: FakeSsh) -> None:
    path, _ = control_socket(tmp_path, "stale")
    ssh = fake_ssh(control=str(path))
    assert await check_control_socket(str(ssh), "devbox", []) is Control.STALE
    assert not path.exists()
    tunnel = await open_tunnel("devbox", ssh=str(ssh), timeout=10)
    await tunnel.close()
    assert not option(calls(tmp_path)[0], "ControlPath=none")  # nothing left to go around


async def test_a_master_that_greets_is_kept_and_used(tmp_path: Path, fake_ssh: FakeSsh) -> None:
    path, server = control_socket(tmp_path, "greets")
    assert server is not None

    async def hello() -> None:
        loop = asyncio.get_running_loop()
        conn, _ = await loop.sock_accept(server)
        await loop.sock_sendall(conn, b"\0\0\0\x05")
        conn.close()

    greeter = asyncio.ensure_future(hello())
    try:
        ssh = fake_ssh(control=str(path))
        assert await check_control_socket(str(ssh), "devbox", []) is Control.GREETS
        assert stat.S_ISSOCK(path.stat().st_mode)
    finally:
        greeter.cancel()
        server.close()
