"""The network rule with real parts: bubblewrap, the forwarder inside, the gate outside.

A sandboxed Python client (plain ``bwrap`` around the gate's forwarder, as the launcher
builds it) reaches the allowed local server (the scripted model server) and no other: not a
second local server, not an address outside, not a name. Every server here binds 127.0.0.1,
lives at most a minute and is stopped by its test.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from msgspec import structs

from polypilot_tui.agents.sandbox import launch_argv, plan_for, program_folders, sandbox_problem
from polypilot_tui.agents.sandbox_net import Limits, NetworkGate, Refusal, open_gate
from polypilot_tui.config import AgentConfig, ProviderConfig, Settings
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode
from tests.support.http_server import LocalServer, local_server
from tests.support.model_server import ModelServer
from tests.support.processes import communicated
from tests.support.waiting import until

BWRAP = shutil.which("bwrap")
NO_SANDBOX_HERE = sandbox_problem(Sandbox(SandboxMode.WORKSPACE))
pytestmark = pytest.mark.skipif(NO_SANDBOX_HERE is not None, reason=f"no sandbox here: {NO_SANDBOX_HERE}")

WAIT = 20.0


def sandboxed(gate: NetworkGate, argv: list[str]) -> list[str]:
    """Plain bubblewrap around the forwarder, as agents/sandbox.py puts it together."""
    assert BWRAP is not None
    base = [BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    inner = gate.wrap(argv)
    shown = [arg for folder in program_folders(inner) for arg in ("--ro-bind", folder, folder)]
    return [*base, *shown, "--unshare-pid", "--die-with-parent", *gate.bwrap_args(), "--", *inner]


async def run_inside(gate: NetworkGate, code: str, timeout: float = WAIT) -> tuple[int, str, str]:
    """Run Python ``code`` in the sandbox with the gate's environment; (status, out, err)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **gate.env()}
    process = await asyncio.create_subprocess_exec(
        *sandboxed(gate, [sys.executable, "-I", "-c", textwrap.dedent(code)]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    out, err = await communicated(process, timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture
def other_server() -> Iterator[LocalServer]:
    """A second local server the rule does not allow (60 s at most)."""
    with local_server(lambda path: f"other server: {path}".encode()) as server:
        yield server


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(max_seconds=60) as server:
        yield server


@pytest.fixture
async def gate_of(tmp_path: Path) -> AsyncIterator[list[NetworkGate]]:
    """Gates a test opens, closed (and checked closed) at its end."""
    gates: list[NetworkGate] = []
    yield gates
    for gate in gates:
        gate.close()
        await asyncio.wait_for(gate.wait_closed(), 5)
        assert not gate.path.exists()


MODELS_CALL = """
    import json, urllib.request
    with urllib.request.urlopen("{url}/models", timeout=10) as answer:
        print("models:", [m["id"] for m in json.load(answer)["data"]][:1])
"""


async def test_a_sandboxed_client_reaches_its_model_and_nothing_else(
    tmp_path: Path, model: ModelServer, other_server: LocalServer, gate_of: list[NetworkGate]
) -> None:
    model_at = f"127.0.0.1:{model.port}"
    other_port = other_server.port
    refused: list[Refusal] = []
    gate = open_gate((model_at,), tmp_path / "gates", on_refusal=refused.append)
    gate_of.append(gate)
    code = f"""
    import http.client, socket, urllib.request, urllib.error
    {textwrap.indent(textwrap.dedent(MODELS_CALL.format(url=model.base_url)), "    ").strip()}
    # loopback goes direct (NO_PROXY): the forwarder's listener on the model's port, and
    # nothing on the other server's
    try:
        urllib.request.urlopen("http://127.0.0.1:{other_port}/secret", timeout=10)
    except urllib.error.URLError as exc:
        print("direct other:", exc.reason)
    # asked of the proxy itself, loopback too: it is the machine's loopback there
    for url in ["{model.base_url}/models", "http://127.0.0.1:{other_port}/secret", "http://example.com/"]:
        proxy = http.client.HTTPConnection("127.0.0.1", {gate.proxy_port}, timeout=10)
        proxy.request("GET", url)
        answer = proxy.getresponse()
        print("proxied:", answer.status, answer.read().decode().strip()[:200])
        proxy.close()
    for address in [("10.1.2.3", 80), ("1.1.1.1", 443)]:
        try:
            socket.create_connection(address, timeout=5)
            print("reached", address)
        except OSError as exc:
            print("direct", address[0], exc.errno)
    try:
        socket.getaddrinfo("example.com", 443)
        print("resolved")
    except OSError:
        print("no dns")
    """
    status, out, err = await run_inside(gate, code)
    assert status == 0, err
    assert "models: ['" in out
    assert "direct other: [Errno 111] Connection refused" in out  # nothing listens there inside
    assert "proxied: 200 {" in out
    told = "is not in this session's network rule (it allows only " + model_at + ")"
    assert f"proxied: 403 polypilot sandbox: 127.0.0.1:{other_port} {told}" in out
    assert f"proxied: 403 polypilot sandbox: example.com:80 {told}" in out
    assert "reached" not in out
    assert "direct 10.1.2.3 101" in out and "direct 1.1.1.1 101" in out  # ENETUNREACH
    assert "no dns" in out
    assert [r.target for r in refused] == [f"127.0.0.1:{other_port}", "example.com:80"]
    assert gate.refusals() == tuple(refused)
    assert len(model.requests) == 2


async def test_the_agents_exit_status_and_pid_are_its_own(tmp_path: Path, gate_of: list[NetworkGate]) -> None:
    gate = open_gate((), tmp_path / "gates")
    gate_of.append(gate)
    status, out, _ = await run_inside(gate, "import os, sys; print(os.getpid()); sys.exit(7)")
    assert status == 7
    # --unshare-pid: bwrap's init is 1, the forwarder (then the agent, by exec) is 2
    assert out.strip() == "2"


async def test_a_named_host_is_reached_through_connect_and_no_other(
    tmp_path: Path, other_server: LocalServer, gate_of: list[NetworkGate]
) -> None:
    """``localhost:PORT`` allowed by name: CONNECT to it works (the gate resolves it
    outside); CONNECT to the same server by address, or to another name, is refused."""
    port = other_server.port
    gate = open_gate((f"localhost:{port}",), tmp_path / "gates")
    gate_of.append(gate)
    code = f"""
    import http.client
    for host in ["localhost", "127.0.0.1", "example.com"]:
        conn = http.client.HTTPConnection("127.0.0.1", {gate.proxy_port}, timeout=10)
        conn.set_tunnel(host, {port})
        try:
            conn.request("GET", "/tunnelled")
            print(host, conn.getresponse().read().decode())
        except OSError as exc:
            print(host, "refused:", exc)
        conn.close()
    """
    status, out, err = await run_inside(gate, code)
    assert status == 0, err
    assert "localhost other server: /tunnelled" in out
    assert "127.0.0.1 refused: Tunnel connection failed: 403 Forbidden" in out
    assert "example.com refused: Tunnel connection failed: 403 Forbidden" in out
    assert [r.target for r in gate.refusals()] == [f"127.0.0.1:{port}", f"example.com:{port}"]


async def test_too_many_connections_and_a_huge_head_are_refused_cleanly(
    tmp_path: Path, model: ModelServer, gate_of: list[NetworkGate]
) -> None:
    gate = open_gate((f"127.0.0.1:{model.port}",), tmp_path / "gates", limits=Limits(connections=2))
    gate_of.append(gate)
    code = f"""
    import socket
    def ask(head):
        s = socket.create_connection(("127.0.0.1", {gate.proxy_port}), timeout=10)
        s.sendall(head)
        return s
    held = [ask(b"CONNECT 127.0.0.1:{model.port} HTTP/1.1\\r\\n\\r\\n") for _ in range(2)]
    for s in held:
        print("held:", s.recv(100).split(b"\\r\\n")[0].decode())
    third = ask(b"CONNECT 127.0.0.1:{model.port} HTTP/1.1\\r\\n\\r\\n")
    print("third:", third.recv(300).split(b"\\r\\n")[0].decode())
    for s in held:
        s.close()
    pad = b"X-Pad: " + b"a" * 40000
    huge = ask(b"GET http://127.0.0.1:{model.port}/v1/models HTTP/1.1\\r\\n" + pad + b"\\r\\n\\r\\n")
    print("huge:", huge.recv(300).split(b"\\r\\n")[0].decode())
    """
    status, out, err = await run_inside(gate, code)
    assert status == 0, err
    assert out.count("held: HTTP/1.1 200 Connection established") == 2
    assert "third: HTTP/1.1 503 Service Unavailable" in out
    assert "huge: HTTP/1.1 431 Request Header Fields Too Large" in out
    whys = [r.why for r in gate.refusals()]
    assert whys == ["more than 2 connections at once", "a request head larger than 16384 bytes"]
    assert model.requests == []  # neither reached the server


async def test_a_plain_http_request_through_the_proxy_reaches_the_allowed_server(
    tmp_path: Path, model: ModelServer, gate_of: list[NetworkGate]
) -> None:
    """``GET http://host/path`` through the proxy reaches the server as ``GET /path``
    (origin form), without the proxy's own headers."""
    gate = open_gate((f"127.0.0.1:{model.port}",), tmp_path / "gates")
    gate_of.append(gate)
    code = MODELS_CALL.format(url=model.base_url)
    status, out, err = await run_inside(gate, code)
    assert status == 0, err
    assert "models:" in out
    [request] = model.requests
    assert request.path == "/models"  # the server's record drops /v1; an absolute URL would stay whole
    assert request.headers.get("Connection") == "close"
    assert not any(name.lower().startswith("proxy-") for name in request.headers)


async def test_closing_the_gate_ends_its_connections_and_leaves_no_socket(tmp_path: Path, model: ModelServer) -> None:
    before = _open_sockets()
    gate = open_gate((f"127.0.0.1:{model.port}",), tmp_path / "gates")
    assert gate.path.is_socket() and (gate.path.stat().st_mode & 0o777) == 0o600
    assert (tmp_path / "gates").stat().st_mode & 0o777 == 0o700
    # A client talking to the gate as the forwarder would, held open mid-pipe.
    reader, writer = await asyncio.open_unix_connection(str(gate.path))
    writer.write(f"PROXY\nCONNECT 127.0.0.1:{model.port} HTTP/1.1\r\n\r\n".encode())
    assert (await reader.readline()).startswith(b"HTTP/1.1 200")
    await until(lambda: gate.open_connections() == 1, 5, "the connection in the gate")
    gate.close()
    await asyncio.wait_for(gate.wait_closed(), 5)
    assert await asyncio.wait_for(reader.read(), 5) == b"\r\n"  # the rest of the head, then closed
    writer.close()
    await writer.wait_closed()
    assert not gate.path.exists()
    assert gate.open_connections() == 0
    assert [t for t in asyncio.all_tasks() if "NetworkGate" in repr(t.get_coro())] == []
    await until(lambda: _open_sockets() <= before, 5, lambda: f"sockets back to {before} (now {_open_sockets()})")
    gate.close()  # twice: nothing happens


async def test_a_connection_idle_too_long_is_closed(tmp_path: Path, model: ModelServer) -> None:
    clock = FakeClock()
    gate = open_gate((f"127.0.0.1:{model.port}",), tmp_path / "gates", clock=clock, limits=Limits(idle=30))
    try:
        reader, writer = await asyncio.open_unix_connection(str(gate.path))
        writer.write(f"TO 127.0.0.1:{model.port}\n".encode())
        await until(lambda: gate.open_connections() == 1 and clock.next_deadline() is not None, 5, "a pipe")
        await clock.advance(29)
        assert gate.open_connections() == 1
        await clock.advance(2)
        assert await asyncio.wait_for(reader.read(), 5) == b""
        await until(lambda: gate.open_connections() == 0, 5, "the idle pipe closed")
        writer.close()
    finally:
        gate.close()
        await gate.wait_closed()


def _open_sockets() -> int:
    return sum(1 for fd in os.listdir("/proc/self/fd") if _is_socket(fd))


def _is_socket(fd: str) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    except OSError:
        return False


def test_the_forwarder_is_standard_library_only() -> None:
    """It runs with ``-I -S`` inside the sandbox: nothing of ours or of site-packages."""
    from polypilot_tui.agents import sandbox_forwarder

    out = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import runpy; runpy.run_path({sandbox_forwarder.__file__!r}, run_name='__main__')",
        ],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert out.returncode == 2, out.stderr
    assert "usage:" in out.stderr


async def test_the_gate_closes_itself_when_its_sandbox_ends(tmp_path: Path) -> None:
    gate = open_gate((), tmp_path / "gates")
    try:
        status, out, _ = await run_inside(gate, "import os; print(os.environ['HTTPS_PROXY'], os.environ['NO_PROXY'])")
        assert (status, out.strip()) == (0, f"http://127.0.0.1:{gate.proxy_port} localhost,127.0.0.1,::1")
        await until(lambda: gate.closed, 5, "the gate closed with its sandbox")
        await asyncio.wait_for(gate.wait_closed(), 5)
        assert not gate.path.exists()
    finally:
        gate.close()


async def test_a_gate_no_sandbox_came_to_closes(tmp_path: Path) -> None:
    clock = FakeClock()
    gate = open_gate((), tmp_path / "gates", clock=clock, limits=Limits(start_wait=60))
    try:
        await clock.advance(59)
        assert not gate.closed
        await clock.advance(2)
        assert gate.closed and not gate.path.exists()
    finally:
        gate.close()


async def test_a_long_folder_and_a_stale_socket(tmp_path: Path) -> None:
    """A state folder longer than a socket address holds still has gates; the socket of a
    gate that ended with its engine is removed when the next one opens."""
    folder = tmp_path / ("a-long-state-folder-name-" * 5) / "net"
    assert len(os.fsencode(folder)) > 108
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    short = tmp_path / "s.sock"
    stale.bind(str(short))
    stale.close()  # bound, never listened on: connects are refused, as to a dead engine's
    folder.mkdir(parents=True, mode=0o700)
    os.rename(short, folder / "net-deadbeef.sock")
    gate = open_gate((), folder)
    try:
        assert [p.name for p in folder.iterdir()] == [gate.path.name]
        status, _, err = await run_inside(gate, "pass")
        assert status == 0, err
    finally:
        gate.close()


async def test_the_launcher_keeps_the_rule_with_the_model_endpoint_added(
    tmp_path: Path, model: ModelServer, other_server: LocalServer
) -> None:
    """agents/sandbox.py's argv for a session with a network rule: the agent's model endpoint
    is added from its configuration, the gate is in the (hidden) state folder, and only the
    session's own socket is seen inside."""
    # The worktree in the state folder, as polypilot makes them: the folder is then hidden
    # entry by entry, and the gates' folder is made after the plan.
    state, home, work = tmp_path / "state", tmp_path / "home", tmp_path / "state" / "worktrees" / "w1"
    for folder in (state, home, work):
        folder.mkdir(parents=True, exist_ok=True)
    settings = Settings.read(None, state_dir=state)
    env = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(tmp_path / "no-runtime")}
    agent = AgentConfig(name="c", kind="copilot", provider=ProviderConfig(base_url=model.base_url))
    plan = plan_for(Sandbox(SandboxMode.WORKSPACE, network=("example.com:443",)), work, agent, settings, env)
    assert plan is not None and plan.rules.network == ("example.com:443", f"127.0.0.1:{model.port}")
    assert "model endpoint is not known" not in "\n".join(plan.rules.lines())
    other_port = other_server.port
    code = f"""
    import os, urllib.request, urllib.error
    {textwrap.indent(textwrap.dedent(MODELS_CALL.format(url=model.base_url)), "    ").strip()}
    try:
        urllib.request.urlopen("http://127.0.0.1:{other_port}/", timeout=10)
    except urllib.error.URLError as exc:
        print("other:", exc.reason)
    gates = {str(state / "net")!r}
    print("gates seen:", os.listdir(gates) if os.path.isdir(gates) else [])
    print("own socket:", os.path.exists("/tmp/.polypilot-net.sock"))
    """
    argv = launch_argv(plan, [sys.executable, "-I", "-c", textwrap.dedent(code)], work, env)
    process = await asyncio.create_subprocess_exec(*argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 0, err.decode()
    said = out.decode()
    assert "models: ['" in said and "other: [Errno 111] Connection refused" in said
    assert "gates seen: []" in said and "own socket: True" in said
    await until(lambda: list((state / "net").iterdir()) == [], 5, "the gate closed with its sandbox")


def test_an_agent_whose_model_endpoint_is_not_known_is_said_so(tmp_path: Path) -> None:
    settings = Settings.read(None, state_dir=tmp_path / "state")
    env = {"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    signed_in = AgentConfig(name="copilot", kind="copilot")  # GitHub's hosts: its own business
    plan = plan_for(Sandbox(SandboxMode.WORKSPACE, network=()), tmp_path, signed_in, settings, env)
    assert plan is not None and plan.rules.network == ()
    assert "network: the agent's model endpoint is not known; list its host:port in the rule" in plan.rules.lines()


async def test_the_proxy_takes_a_port_no_allowed_endpoint_takes(tmp_path: Path) -> None:
    gate = open_gate(("127.0.0.1:3128", "localhost:3129", "example.com:3130"), tmp_path / "gates")
    try:
        assert gate.proxy_port == 3130  # a named host's port is not taken inside
        wrapped = gate.wrap(["agent"])
        listens = [wrapped[i + 1] for i, arg in enumerate(wrapped) if arg == "--listen"]
        assert listens == ["127.0.0.1:3128", "localhost:3129"]
        assert wrapped[wrapped.index("--proxy") + 1] == "3130" and wrapped[-2:] == ["--", "agent"]
    finally:
        gate.close()


async def test_a_server_the_agent_runs_inside_is_reached_by_a_proxy_aware_client(
    tmp_path: Path, gate_of: list[NetworkGate]
) -> None:
    """The sandbox's loopback is its own: a client that honours the proxy variables reaches
    a server started inside directly (opencode's ACP side talks to its own server on
    127.0.0.1:4096; through the proxy that address would be the machine's, and refused)."""
    gate = open_gate((), tmp_path / "gates")
    gate_of.append(gate)
    code = """
    import threading, urllib.request
    from http.server import BaseHTTPRequestHandler, HTTPServer
    class Inside(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.send_header("Content-Length", "6"); self.end_headers()
            self.wfile.write(b"inside")
        def log_message(self, *args): pass
    for host in ["127.0.0.1", "localhost"]:
        server = HTTPServer(("127.0.0.1", 0), Inside)
        threading.Thread(target=server.handle_request, daemon=True).start()
        with urllib.request.urlopen(f"http://{host}:{server.server_port}/", timeout=10) as answer:
            print(host, answer.read().decode())
    """
    status, out, err = await run_inside(gate, code)
    assert status == 0, err
    assert out.split() == ["127.0.0.1", "inside", "localhost", "inside"]
    assert gate.refusals() == ()


def test_a_rule_that_cannot_be_kept_is_refused_before_the_session_is_made() -> None:
    """A bad entry, or a rule without the sandbox that keeps it, is said at the new session
    (sandbox_problem), not found at the agent's start — and never run as no rule."""
    off = sandbox_problem(Sandbox(SandboxMode.OFF, network=("example.com:443",)))
    assert off is not None and "choose the workspace sandbox" in off
    bad = sandbox_problem(Sandbox(SandboxMode.WORKSPACE, network=("example.com:443", "https://x.example/v1")))
    assert bad == "the network rule's entry 'https://x.example/v1' is a URL: write its host:port (x.example:443)"
    good = Sandbox(SandboxMode.WORKSPACE, network=("example.com:443",))
    assert sandbox_problem(good) == sandbox_problem(Sandbox(SandboxMode.WORKSPACE))  # as without a rule


async def test_a_plain_request_for_another_host_than_its_url_is_refused(
    tmp_path: Path, other_server: LocalServer, gate_of: list[NetworkGate]
) -> None:
    """An allowed address shared by many sites (a CDN) answers for the Host header: one that
    names another host is refused; the URL's own (any case, with its port) passes."""
    port = other_server.port
    gate = open_gate((f"localhost:{port}",), tmp_path / "gates")
    gate_of.append(gate)
    reader, writer = await asyncio.open_unix_connection(str(gate.path))
    writer.write(f"PROXY\nGET http://localhost:{port}/a HTTP/1.1\r\nHost: elsewhere.example\r\n\r\n".encode())
    assert (await asyncio.wait_for(reader.readline(), 5)).startswith(b"HTTP/1.1 400")
    writer.close()
    reader, writer = await asyncio.open_unix_connection(str(gate.path))
    writer.write(f"PROXY\nGET http://localhost:{port}/b HTTP/1.1\r\nHost: LocalHost:{port}\r\n\r\n".encode())
    answer = await asyncio.wait_for(reader.read(), 5)
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"other server: /b")
    writer.close()
    assert [(r.target, r.why) for r in gate.refusals()] == [(f"localhost:{port}", "its Host header names another host")]


def test_the_rule_on_the_command_line() -> None:
    from polypilot_tui.cli import build_parser, sandbox_choice

    parser = build_parser()
    for argv in (["new"], ["run", "p"], ["fan-out", "copilot:2", "p"]):
        cmd, rest = argv[:1], argv[1:]
        rule = sandbox_choice(parser.parse_args([*cmd, "--network", "a.example:443, 127.0.0.1:8000", *rest]))
        assert rule == Sandbox(SandboxMode.WORKSPACE, ("a.example:443", "127.0.0.1:8000"))
        assert sandbox_choice(parser.parse_args([*cmd, "--network", "", *rest])) == Sandbox(SandboxMode.WORKSPACE, ())
        off = sandbox_choice(parser.parse_args([*cmd, "--sandbox", "off", "--network", "x:1", *rest]))
        assert off == Sandbox(SandboxMode.OFF, ("x:1",))  # refused when the session is made (below)


async def test_an_agents_rule_is_its_sessions_and_its_agent_runs_behind_the_gate(tmp_path: Path) -> None:
    """``network = []`` in the agents file: the session's sandbox has the rule, F2 says the
    agent's model endpoint is not known, and the agent (a real ACP process) runs through the
    forwarder; a rule without the sandbox is refused when the session is made."""
    from polypilot_tui.config import AgentCatalog
    from polypilot_tui.engine import verbs
    from polypilot_tui.engine.api import EngineError
    from polypilot_tui.engine.builder import build_engine
    from tests.unit.test_sandbox_sessions import ON, fake, settings_of

    work = tmp_path / "work"
    work.mkdir()
    ruled = structs.replace(fake(tmp_path), **{"network": []})
    unkept = structs.replace(fake(tmp_path, sandbox="off"), **{"name": "unkept", "network": ["a.example:443"]})
    engine = build_engine(settings_of(tmp_path), AgentCatalog({"fake": ruled, "unkept": unkept}), persist=False)
    await engine.start()
    try:
        sid = await engine.call(verbs.NEW_SESSION, verbs.NewSession("fake", folder=str(work)))
        assert engine.view(sid).sandbox == Sandbox(SandboxMode.WORKSPACE, ())
        details = await engine.call(verbs.DETAILS, verbs.SessionRef(sid))
        assert "network: only none" in details.sandbox_rules
        assert (
            "network: the agent's model endpoint is not known; list its host:port in the rule" in details.sandbox_rules
        )
        await engine.call(verbs.SEND, verbs.Send(sid, "hello"))
        await until(lambda: engine.view(sid).turns >= 1, 30, "the agent's reply from behind the gate")
        assert list((tmp_path / "state" / "net").glob("net-*.sock")), "no gate was opened"
        # the sandbox chosen (the dialog, --sandbox workspace) keeps the agent's rule: never widened
        chosen = await engine.call(verbs.NEW_SESSION, verbs.NewSession("fake", folder=str(work), sandbox=ON))
        assert engine.view(chosen).sandbox == Sandbox(SandboxMode.WORKSPACE, ())
        wider = Sandbox(SandboxMode.WORKSPACE, ("a.example:443",))  # a rule asked for is the session's
        asked = await engine.call(verbs.NEW_SESSION, verbs.NewSession("fake", folder=str(work), sandbox=wider))
        assert engine.view(asked).sandbox == wider
        with pytest.raises(EngineError, match="choose the workspace sandbox"):
            await engine.call(verbs.NEW_SESSION, verbs.NewSession("unkept", folder=str(work)))
    finally:
        await engine.close()
    await until(lambda: not list((tmp_path / "state" / "net").glob("net-*.sock")), 10, "the gate closed")


@pytest.mark.parametrize("rule", [["--sandbox", "off", "--network", "a.example:443"], ["--network", "bad"]])
def test_a_run_whose_rule_cannot_be_kept_says_so_before_anything_starts(tmp_path: Path, rule: list[str]) -> None:
    """Exit 2 and why, as for a missing agent: no head start of the agent outside its
    sandbox, no session."""
    from tests.unit.test_sandbox_sessions import FAKE_AGENT, running

    agents = tmp_path / "agents.toml"
    agents.write_text(f'[fake]\nkind = "acp"\ncommand = "{sys.executable}"\nargs = ["{FAKE_AGENT}"]\n')
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env |= {"POLYPILOT_STATE_DIR": str(tmp_path / "state"), "POLYPILOT_AGENTS_FILE": str(agents)}
    cli = [sys.executable, "-m", "polypilot_tui", "run", "--agent", "fake", *rule, "hello"]
    done = subprocess.run(cli, cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "cannot start sandboxed" in done.stderr and ("network rule" in done.stderr)
    assert not running(FAKE_AGENT, work)
