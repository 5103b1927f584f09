"""Inside a sandbox with a network rule: the agent's only way out, over the gate's socket.

The sandbox has a network of its own (bubblewrap ``--unshare-net``): a loopback and nothing
else. The launcher starts, instead of the agent::

    python -I -S sandbox_forwarder.py --gate SOCKET --proxy PORT [--listen HOST:PORT]...
        [--env NAME=VALUE]... -- <agent argv...>

and this script

1. listens on ``127.0.0.1:PORT`` (the proxy the agent's ``HTTP_PROXY``/``HTTPS_PROXY`` name,
   set here by ``--env``: they cannot be forgotten apart from the forwarder) and on each
   allowed loopback endpoint's own address (``127.0.0.1:8000``; ``localhost`` also on
   ``[::1]``), so a model URL such as ``http://127.0.0.1:8000/v1`` works unchanged;
2. forks a *relay*, which serves those sockets, and execs the agent itself: the agent keeps
   the process the launcher started (its pid, its pipes, its exit status), and the leash and
   Stop end it as they would without a rule. The relay holds none of the agent's pipes, holds
   one connection to the gate for its whole life (``HOLD``: the gate closes when the last
   one ends) and ends when the agent ends (a pidfd, else a poll of its parent);
3. hands every connection to the gate (agents/sandbox_net.py, outside, in the engine) over
   the bound Unix socket, after one line that names what it came for (``PROXY`` or
   ``TO host:port``), then copies bytes both ways. The gate decides: this script checks
   nothing, and the agent could skip it and talk to the socket itself to no advantage.

Standard library only, run with ``-S`` (no site, fast start), like leash.py.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import threading

MAX_OPEN = 256
"""Connections relayed at once; one more is closed at once (the gate bounds them too)."""
CHUNK = 65536
POLL = 0.5
"""Seconds between two looks at the parent where there is no pidfd."""


def split_endpoint(entry: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host, port); ValueError when it is neither."""
    host, _, port = entry.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isdigit():
        raise ValueError(f"not host:port: {entry!r}")
    return host, int(port)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def open_listeners(proxy_port: int, endpoints: list[str]) -> list[tuple[socket.socket, bytes]]:
    """Each listening socket and the line that tells the gate what its connections are for."""
    out = [(_listen("127.0.0.1", proxy_port), b"PROXY\n")]
    bound: set[tuple[str, int]] = {("127.0.0.1", proxy_port)}
    for entry in endpoints:
        host, port = split_endpoint(entry)
        hosts = ["127.0.0.1", "::1"] if host == "localhost" else [host]
        for address in hosts:
            if (address, port) in bound:
                continue  # 127.0.0.1:8000 and localhost:8000: one listener does for both
            try:
                out.append((_listen(address, port), b"TO " + entry.encode("ascii") + b"\n"))
            except OSError as exc:
                if address != "::1" or host != "localhost":
                    raise
                sys.stderr.write(f"sandbox network: no [::1]:{port} ({exc.strerror}); localhost is 127.0.0.1 only\n")
            bound.add((address, port))
    return out


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends; an error ends both ways (the other pump
    would otherwise wait on a peer that is gone)."""
    try:
        while data := src.recv(CHUNK):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def relay(conn: socket.socket, gate: str, preface: bytes, slots: threading.BoundedSemaphore) -> None:
    """One connection of the agent's, handed to the gate."""
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(gate)
        up.sendall(preface)
        back = threading.Thread(target=_pump, args=(up, conn), daemon=True)
        back.start()
        _pump(conn, up)
        back.join()
    except OSError as exc:
        sys.stderr.write(f"sandbox network: the gate cannot be reached ({exc.strerror or exc})\n")
    finally:
        up.close()
        conn.close()
        slots.release()


def _parent_ended(parent: int) -> int | None:
    """A pidfd that becomes readable when ``parent`` ends, or None (then: poll getppid)."""
    try:
        return os.pidfd_open(parent)
    except (AttributeError, OSError):
        return None


def serve(gate: str, listeners: list[tuple[socket.socket, bytes]], parent: int) -> None:
    """Accept and relay until ``parent`` (the agent) ends."""
    watch = _parent_ended(parent)
    slots = threading.BoundedSemaphore(MAX_OPEN)
    poller = select.poll()
    by_fd = {sock.fileno(): (sock, preface) for sock, preface in listeners}
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    if watch is not None:
        poller.register(watch, select.POLLIN)
    while True:
        ready = poller.poll(None if watch is not None else int(POLL * 1000))
        if watch is None and os.getppid() != parent:
            return
        for fd, _ in ready:
            if fd == watch:
                return
            sock, preface = by_fd[fd]
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            if not slots.acquire(blocking=False):
                conn.close()
                continue
            threading.Thread(target=relay, args=(conn, gate, preface, slots), daemon=True).start()


def _start_relay(gate: str, listeners: list[tuple[socket.socket, bytes]]) -> None:
    """Fork the relay; in this process, only the agent is left to start."""
    parent = os.getpid()
    if os.fork():
        for sock, _ in listeners:
            sock.close()
        return
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)  # none of the agent's pipes: they end when the agent does
        hold = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(OSError):  # no gate: each relay says so on the agent's stderr
            hold.connect(gate)
            hold.sendall(b"HOLD\n")
        serve(gate, listeners, parent)
    finally:
        os._exit(0)


USAGE = (
    "usage: sandbox_forwarder.py --gate SOCKET --proxy PORT [--listen HOST:PORT]... [--env NAME=VALUE]... "
    "-- COMMAND [ARG...]\n"
)


def parse(args: list[str]) -> tuple[str, int, list[str], dict[str, str], list[str]]:
    """(gate, proxy port, endpoints to listen on, environment, argv); ValueError when wrong."""
    gate, proxy, listen, env = "", 0, [], {}
    rest = list(args)
    while rest and rest[0] != "--":
        if len(rest) < 2:
            raise ValueError(f"{rest[0]} needs a value")
        flag, value, rest = rest[0], rest[1], rest[2:]
        if flag == "--gate":
            gate = value
        elif flag == "--proxy":
            proxy = int(value)
        elif flag == "--listen":
            split_endpoint(value)
            listen.append(value)
        elif flag == "--env" and "=" in value:
            name, _, val = value.partition("=")
            env[name] = val
        else:
            raise ValueError(f"unknown {flag} {value}")
    if not gate or not proxy or len(rest) < 2:
        raise ValueError("--gate, --proxy and a command are needed")
    return gate, proxy, listen, env, rest[1:]


def main(args: list[str]) -> int:
    try:
        gate, proxy_port, endpoints, env, argv = parse(args)
    except ValueError as exc:
        sys.stderr.write(f"sandbox_forwarder: {exc}\n{USAGE}")
        return 2
    try:
        listeners = open_listeners(proxy_port, endpoints)
    except OSError as exc:
        sys.stderr.write(f"sandbox network: cannot listen inside the sandbox: {exc}\n")
        return 126
    _start_relay(gate, listeners)
    os.environ.update(env)
    # Python ignores SIGPIPE and SIGXFSZ for itself; the agent and its tools must not inherit that.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[0]}: {exc.strerror or exc}\n")
        return 127
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
