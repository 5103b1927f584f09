"""A sandboxed session's network rule: only the endpoints it allows, through a gate we hold.

The sandbox gets a network of its own (``--unshare-net``: a loopback and nothing else, so no
route out, no DNS, and none of the machine's local servers). Inside, the forwarder
(agents/sandbox_forwarder.py, which then execs the agent) listens on the allowed loopback
endpoints' own ports (a model URL ``http://127.0.0.1:8000/v1`` works unchanged) and on one
port as an HTTP proxy (``HTTP_PROXY``/``HTTPS_PROXY``: CONNECT, or plain ``GET http://…``),
and hands each connection to the gate over one Unix socket bound into the sandbox. The gate,
here in the engine's loop, is where the rule is kept: it reads what the connection is for,
checks it against the allowed ``host:port`` endpoints (exactly: a name is not its address),
resolves and connects from outside, and copies bytes both ways. It bounds what it is sent
(connections at once, the size and time of a request's head, idle time) and answers a refused
proxy request with a 403 that says why, so a tool's output shows it; each refusal is kept
(:meth:`NetworkGate.refusals`) and logged once per target (logs are redacted).

Everything inside the sandbox is untrusted: the agent may kill the forwarder and talk to the
gate's socket itself, which gets it nothing the rule does not allow. Only TCP goes through;
UDP, ICMP and DNS lookups inside fail (a proxy-aware client sends the name to the proxy).
Loopback names bypass the proxy (``NO_PROXY``): the sandbox's loopback is its own.
Unix sockets are files: the network rule does not cover them (the workspace rule hides the
folders that hold ours, this gate's folder included; only this session's socket is bound in).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import json
import logging
import os
import secrets
import socket
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from polypilot_tui.config import PROVIDER_URL_VARIABLE, AgentConfig
from polypilot_tui.domain.clock import Clock, SystemClock, within
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.urls import url_problem
from polypilot_tui.infra.private import private_dir
from polypilot_tui.infra.redact import REDACTOR

log = logging.getLogger(__name__)

FORWARDER_FILE = str(Path(__file__).with_name("sandbox_forwarder.py"))
INSIDE = "/tmp/.polypilot-net.sock"
"""Where the gate's socket is inside the sandbox: in its private /tmp (made by the launcher
before this), short, and the same for every session (each sees only its own)."""
PROXY_PORT = 3128
"""The proxy's port inside the sandbox (its own loopback: nothing else is there), or the next
one an allowed loopback endpoint does not take."""
CHUNK = 65536
LOOPBACK_NAMES = "localhost,127.0.0.1,::1"
REFUSALS_KEPT = 50
LOGGED_TARGETS = 100
"""Refusals logged one line per target, up to this many targets (a loop of refused connects
must not flood the log); the rest are counted."""
CONFIG_MAX_BYTES = 1_000_000
"""An agent's config file read for its model endpoint is read no further than this."""


@dataclass(frozen=True)
class Limits:
    """What the gate accepts from inside the sandbox."""

    connections: int = 64
    """Open at once; one more gets a 503 (or is closed, for a raw endpoint)."""
    header_bytes: int = 16 * 1024
    """A proxy request's head (request line and headers); a larger one gets a 431."""
    header_wait: float = 10.0
    """Seconds for the head to arrive."""
    connect_wait: float = 10.0
    """Seconds for the outside connect."""
    idle: float = 300.0
    """Seconds without a byte either way before a connection is closed."""
    start_wait: float = 60.0
    """Seconds for the forwarder to come: a gate nobody took (the sandbox did not start)
    closes then."""


@dataclass(frozen=True)
class Refusal:
    """A connection the rule refused: what it was for (``host:port``, redacted) and why."""

    target: str
    why: str


class EndpointError(ValueError):
    """A network rule entry is not ``host:port``; the message says what is wrong."""


# ---- endpoints --------------------------------------------------------------------------


def parse_endpoint(text: str) -> tuple[str, int]:
    """``host:port`` (or ``[v6]:port``) -> (host, port), the host lower-case and without a
    trailing dot; EndpointError when it is not one an agent could connect to."""
    raw = text.strip()
    if "://" in raw:
        raise EndpointError(f"{text!r} is a URL: write its host:port ({url_endpoint(raw) or 'host:port'})")
    host, sep, port_text = raw.rpartition(":")
    if not sep or not port_text.isdigit():
        raise EndpointError(f"{text!r} is not host:port (a port number is needed)")
    port = int(port_text)
    if not 0 < port < 65536:
        raise EndpointError(f"{text!r}: the port must be 1 to 65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise EndpointError(f"{text!r}: {host!r} is not an IPv6 address") from None
    elif ":" in host:
        raise EndpointError(f"{text!r}: write an IPv6 address in brackets, [{host}]:{port}")
    host = host.lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        labels = host.split(".")
        if not host or len(host) > 253 or not all(_label(label) for label in labels):
            raise EndpointError(f"{text!r}: {host!r} is not a host name or an address") from None
    else:
        if address.is_unspecified or address.is_multicast:
            raise EndpointError(f"{text!r}: {host} is not an address to connect to")
        host = str(address)  # one spelling: "::0001" and "::1" are one endpoint
    return host, port


def _label(label: str) -> bool:
    return 0 < len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii() and label[0] != "-"


def rule_problem(network: tuple[str, ...]) -> str | None:
    """Why a network rule cannot be kept as written (its first bad entry, and what to write
    instead), or None."""
    for entry in network:
        try:
            parse_endpoint(entry)
        except EndpointError as exc:
            return f"the network rule's entry {exc}"
    return None


def endpoint_text(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_loopback(host: str) -> bool:
    """``host`` is this machine (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_endpoint(url: str) -> str | None:
    """The ``host:port`` an http(s) URL connects to, or None when it is not one."""
    if url_problem(url) is not None:
        return None
    parts = urlsplit(url.strip())
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        return endpoint_text(*parse_endpoint(endpoint_text(parts.hostname or "", port)))
    except EndpointError:
        return None


# ---- the agent's model endpoint ---------------------------------------------------------


def model_endpoints(agent: AgentConfig, env: Mapping[str, str]) -> tuple[str, ...]:
    """The ``host:port`` endpoints the agent's model is reached at, as far as its configuration
    says: a provider's ``base_url``; the Copilot CLI's ``COPILOT_PROVIDER_BASE_URL``;
    opencode's provider ``baseURL`` (``OPENCODE_CONFIG_CONTENT``, ``OPENCODE_CONFIG`` or its
    ``opencode.json``); codex's ``OPENAI_BASE_URL`` or its ``config.toml`` provider; Qwen's
    ``OPENAI_BASE_URL``; Claude's ``ANTHROPIC_BASE_URL``. Empty when none is known (an agent
    signed in to its vendor's service, whose hosts are its own business): the rule's list
    must then name them."""
    merged = {**env, **agent.env}
    program = Path(agent.command or agent.name).name
    urls: list[str] = []
    if agent.provider is not None:
        urls.append(agent.provider.base_url)
    if agent.kind == "copilot" or program == "copilot":
        urls.append(merged.get(PROVIDER_URL_VARIABLE, ""))
    elif program == "opencode":
        urls += _opencode_urls(merged)
    elif program in ("codex-acp", "codex"):
        urls += _codex_urls(merged)
    elif program == "qwen":
        urls.append(merged.get("OPENAI_BASE_URL", ""))
    elif program in ("claude-agent-acp", "claude"):
        urls.append(merged.get("ANTHROPIC_BASE_URL", ""))
    found = (url_endpoint(url) for url in urls if url.strip())
    return tuple(dict.fromkeys(e for e in found if e is not None))


def _read_config(path: Path) -> str | None:
    try:
        with path.open("rb") as fh:
            return fh.read(CONFIG_MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


def _opencode_urls(env: Mapping[str, str]) -> list[str]:
    texts = [env.get("OPENCODE_CONFIG_CONTENT", "")]
    config_home = Path(env.get("XDG_CONFIG_HOME") or Path(env.get("HOME") or Path.home()) / ".config")
    for path in (env.get("OPENCODE_CONFIG", ""), str(config_home / "opencode" / "opencode.json")):
        if path:
            texts.append(_read_config(Path(path)) or "")
    urls: list[str] = []
    for text in texts:
        try:
            config = json.loads(text) if text.strip() else {}
        except ValueError:
            continue  # JSONC or broken: opencode says so itself
        providers = config.get("provider") if isinstance(config, dict) else None
        if not isinstance(providers, dict):
            continue
        chosen = {str(config.get(k, "")).partition("/")[0] for k in ("model", "small_model")} - {""}
        for name, provider in providers.items():
            options = provider.get("options") if isinstance(provider, dict) else None
            if isinstance(options, dict) and isinstance(options.get("baseURL"), str) and (not chosen or name in chosen):
                urls.append(options["baseURL"])
    return urls


def _codex_urls(env: Mapping[str, str]) -> list[str]:
    urls = [env.get("OPENAI_BASE_URL", "")]
    home = Path(env.get("CODEX_HOME") or Path(env.get("HOME") or Path.home()) / ".codex")
    try:
        config: dict[str, Any] = tomllib.loads(_read_config(home / "config.toml") or "")
    except tomllib.TOMLDecodeError:
        return urls
    chosen = config.get("model_provider")
    providers = config.get("model_providers")
    if isinstance(chosen, str) and isinstance(providers, dict) and isinstance(providers.get(chosen), dict):
        base = providers[chosen].get("base_url")
        if isinstance(base, str):
            urls.append(base)
    return urls


# ---- the gate ---------------------------------------------------------------------------


class NetworkGate:
    """The outside end of one sandbox's network rule: a Unix socket served in the engine's
    loop. Made by :func:`open_gate`; :meth:`close` ends it and every connection through it."""

    def __init__(
        self,
        allow: tuple[tuple[str, int], ...],
        listening: socket.socket,
        path: Path,
        *,
        clock: Clock,
        limits: Limits,
        on_refusal: Callable[[Refusal], None] | None,
    ) -> None:
        self.allow = allow
        self.path = path
        self.limits = limits
        self._allowed = frozenset(allow)
        self._listening = listening
        self._clock = clock
        self._on_refusal = on_refusal
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task[None]] = set()
        self._refusals: collections.deque[Refusal] = collections.deque(maxlen=REFUSALS_KEPT)
        self._logged: set[str] = set()
        self.refused_count = 0
        self.closed = False
        taken = {port for host, port in allow if is_loopback(host)}
        self.proxy_port = next(p for p in range(PROXY_PORT, 65536) if p not in taken)
        self._holders = 0
        self._held = False
        self._loop.add_reader(listening.fileno(), self._accept)
        self._unclaimed = clock.call_at(clock.now() + limits.start_wait, self._close_unclaimed)

    # ---- what the launcher asks ---------------------------------------------------
    def bwrap_args(self) -> list[str]:
        """bubblewrap's arguments for the rule: a network of the sandbox's own, and this gate's
        socket at :data:`INSIDE`. They go after ``--tmpfs /tmp`` and the binds into /tmp (a
        later mount covers an earlier one)."""
        return ["--unshare-net", "--bind", str(self.path), INSIDE]

    def loopback_endpoints(self) -> list[str]:
        """The allowed endpoints on this machine, which the forwarder listens on inside."""
        return [endpoint_text(host, port) for host, port in self.allow if is_loopback(host)]

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started by the forwarder, which serves the rule inside and then execs it
        (same process: its pid, pipes and exit status stay the agent's)."""
        listen = [arg for endpoint in self.loopback_endpoints() for arg in ("--listen", endpoint)]
        env = [arg for name, value in self.env().items() for arg in ("--env", f"{name}={value}")]
        return [
            sys.executable,
            "-I",
            "-S",
            FORWARDER_FILE,
            "--gate",
            INSIDE,
            "--proxy",
            str(self.proxy_port),
            *listen,
            *env,
            "--",
            *argv,
        ]

    def env(self) -> dict[str, str]:
        """The agent's proxy variables (the forwarder sets them: :meth:`wrap`). Loopback
        names go direct (``NO_PROXY``): the sandbox's loopback is its own, where the allowed
        loopback endpoints are the forwarder's ports and an agent may run servers of its own
        (opencode's ACP side talks to its own server on 127.0.0.1:4096); through the proxy
        they would be the machine's. Every other name goes to the proxy, which refuses it
        with why when the rule does not allow it. ``NODE_USE_ENV_PROXY`` makes Node's own
        fetch and http use them (Node 24, 22.21 and later; the Copilot CLI bundles Node 24,
        and follows the proxy variables even without it)."""
        proxy = f"http://127.0.0.1:{self.proxy_port}"
        return {
            "HTTP_PROXY": proxy,
            "HTTPS_PROXY": proxy,
            "ALL_PROXY": proxy,
            "http_proxy": proxy,
            "https_proxy": proxy,
            "all_proxy": proxy,
            "NO_PROXY": LOOPBACK_NAMES,
            "no_proxy": LOOPBACK_NAMES,
            "NODE_USE_ENV_PROXY": "1",
        }

    def refusals(self) -> tuple[Refusal, ...]:
        """The latest refusals, oldest first (at most :data:`REFUSALS_KEPT`)."""
        return tuple(self._refusals)

    def open_connections(self) -> int:
        return len(self._tasks)

    def close(self) -> None:
        """Stop accepting, end every connection, remove the socket. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        self._unclaimed.cancel()
        self._loop.remove_reader(self._listening.fileno())
        self._listening.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        for task in list(self._tasks):
            task.cancel()

    async def wait_closed(self) -> None:
        """Wait until every connection task has ended (after :meth:`close`)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # ---- serving ------------------------------------------------------------------
    def _accept(self) -> None:
        try:
            conn, _ = self._listening.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # out of descriptors, say: the next one may do
            log.warning("sandbox network gate %s: accept failed: %s", self.path.name, exc)
            return
        if len(self._tasks) >= 2 * self.limits.connections:  # not even read: the answer costs too
            conn.close()
            self._refuse("-", f"more than {2 * self.limits.connections} connections at once")
            return
        conn.setblocking(False)
        task = self._loop.create_task(self._serve(conn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: socket.socket) -> None:
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_connection(sock=conn, limit=self.limits.header_bytes)
            preface = await within(self._clock, reader.readuntil(b"\n"), self.limits.header_wait)
            over = len(self._tasks) - self._holders > self.limits.connections  # this one counted
            if preface == b"HOLD\n":
                await self._hold(reader)
            elif preface == b"PROXY\n":
                await self._proxy(reader, writer, over)
            elif preface.startswith(b"TO "):
                await self._direct(preface[3:-1].decode("ascii", errors="replace"), reader, writer, over)
            else:
                self._refuse("-", "not a request of the forwarder's")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            pass  # gone, or said nothing usable in time: nothing to answer
        except Exception:  # a bug of ours must not pass silently, nor end the engine's loop
            log.exception("sandbox network gate %s: a connection failed", self.path.name)
        finally:
            if writer is not None:
                writer.close()
            else:
                conn.close()

    async def _hold(self, reader: asyncio.StreamReader) -> None:
        """The forwarder's relay, for as long as it lives: the gate closes when the last one
        goes (the sandbox ended), so it needs no owner to outlive the agent."""
        self._holders += 1
        self._held = True
        try:
            while await reader.read(CHUNK):
                pass  # nothing is said on it
        finally:
            self._holders -= 1
            if self._holders == 0:
                self._loop.call_soon(self.close)

    def _close_unclaimed(self) -> None:
        if not self._held:
            log.info(
                "sandbox network gate %s: no sandbox came within %g s; closed", self.path.name, self.limits.start_wait
            )
            self.close()

    async def _direct(
        self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, over: bool
    ) -> None:
        """A connection to an allowed loopback endpoint's own port inside (raw bytes: no
        words can reach the client, so a refusal only closes it)."""
        if over:
            self._refuse(target, f"more than {self.limits.connections} connections at once")
            return
        endpoint = self._allowed_endpoint(target)
        if endpoint is None:
            return
        upstream = await self._connect(endpoint)
        if isinstance(upstream, str):
            log.info("sandbox network: %s: %s", endpoint_text(*endpoint), upstream)
            return
        log.debug("sandbox network: %s on its own port", endpoint_text(*endpoint))
        await self._pipe(reader, writer, *upstream)

    async def _proxy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, over: bool) -> None:
        try:
            head = await within(self._clock, reader.readuntil(b"\r\n\r\n"), self.limits.header_wait)
        except asyncio.LimitOverrunError:
            self._refuse("-", f"a request head larger than {self.limits.header_bytes} bytes")
            await _answer(writer, 431, "Request Header Fields Too Large", "the request's head is too large")
            return
        except TimeoutError:
            await _answer(writer, 408, "Request Timeout", "the request's head did not arrive in time")
            return
        lines = head[:-4].split(b"\r\n")
        parts = lines[0].decode("latin-1").split(" ")
        if len(parts) != 3:
            await _answer(writer, 400, "Bad Request", "not an HTTP request")
            return
        method, target, version = parts
        if method == "CONNECT":
            authority, first = target, b""
        else:
            url = urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                await _answer(writer, 400, "Bad Request", "the proxy takes http:// URLs; https goes through CONNECT")
                return
            try:
                authority = endpoint_text(url.hostname, url.port or 80)
            except ValueError:
                await _answer(writer, 400, "Bad Request", "the URL's port is not a number")
                return
            if any(host != url.hostname for host in _host_headers(lines[1:])):
                # A server shared by many sites (a CDN) answers for the Host named, not the
                # address connected to: another Host would reach a site the rule does not allow.
                self._refuse(authority, "its Host header names another host")
                await _answer(writer, 400, "Bad Request", "polypilot sandbox: the Host header names another host")
                return
            first = _origin_request(method, url.path, url.query, version, lines[1:])
        if over:
            self._refuse(authority, f"more than {self.limits.connections} connections at once")
            await _answer(writer, 503, "Service Unavailable", "polypilot sandbox: too many connections at once")
            return
        endpoint = self._allowed_endpoint(authority)
        if endpoint is None:
            await _answer(writer, 403, "Forbidden", self._refused_words(authority))
            return
        upstream = await self._connect(endpoint)
        if isinstance(upstream, str):
            await _answer(writer, 502, "Bad Gateway", f"polypilot sandbox: {authority}: {upstream}")
            return
        up_reader, up_writer = upstream
        log.debug("sandbox network: %s through the proxy (%s)", endpoint_text(*endpoint), method)
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(first)
        await self._pipe(reader, writer, up_reader, up_writer)

    def _allowed_endpoint(self, target: str) -> tuple[str, int] | None:
        """``target`` parsed, when the rule allows it; else the refusal is noted and None."""
        try:
            endpoint = parse_endpoint(target)
        except EndpointError:
            self._refuse(target, "not host:port")
            return None
        if endpoint not in self._allowed:
            self._refuse(endpoint_text(*endpoint), "not in the network rule")
            return None
        return endpoint

    def _refused_words(self, target: str) -> str:
        allowed = ", ".join(endpoint_text(h, p) for h, p in self.allow) or "nothing"
        return (
            f"polypilot sandbox: {REDACTOR.cut(target, 200)} is not in this session's network rule "
            f"(it allows only {allowed})"
        )

    async def _connect(self, endpoint: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | str:
        """Connect outside; why not, in words, when it fails."""
        host, port = endpoint
        try:
            return await within(self._clock, asyncio.open_connection(host, port), self.limits.connect_wait)
        except TimeoutError:
            return f"no answer within {self.limits.connect_wait:g} s"
        except socket.gaierror:
            return f"host {host} not found"
        except OSError as exc:
            return exc.strerror or str(exc)

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        """Copy both ways until both ends are done, either fails, or nothing moves for
        :attr:`Limits.idle` seconds."""
        last = [self._clock.now()]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(CHUNK):
                    last[0] = self._clock.now()
                    dst.write(data)
                    await dst.drain()
                if dst.can_write_eof():
                    dst.write_eof()
            except (ConnectionError, OSError):
                writer.transport.abort()
                up_writer.transport.abort()

        async def idle() -> None:
            while (left := last[0] + self.limits.idle - self._clock.now()) > 0:
                await self._clock.sleep(left)

        pumps = asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        watchdog = asyncio.ensure_future(idle())
        either: set[asyncio.Future[Any]] = {pumps, watchdog}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            pumps.cancel()
            watchdog.cancel()
            up_writer.close()
            await asyncio.gather(pumps, watchdog, return_exceptions=True)

    def _refuse(self, target: str, why: str) -> None:
        refusal = Refusal(REDACTOR.cut(target, 200), why)
        self._refusals.append(refusal)
        self.refused_count += 1
        if refusal.target not in self._logged and len(self._logged) < LOGGED_TARGETS:
            self._logged.add(refusal.target)
            log.warning("sandbox network rule refused %s: %s", refusal.target, why)
        if self._on_refusal is not None:
            self._on_refusal(refusal)


def _host_headers(headers: list[bytes]) -> list[str]:
    """The host names of a request's Host headers (lower-case, without the port)."""
    found = []
    for header in headers:
        name, _, value = header.partition(b":")
        if name.strip().lower() == b"host":
            text = value.strip().decode("latin-1").lower()
            found.append(urlsplit(f"//{text}").hostname or text)
    return found


def _origin_request(method: str, path: str, query: str, version: str, headers: list[bytes]) -> bytes:
    """A proxy's ``GET http://host/x`` as the server expects it (``GET /x``), without the
    proxy's own headers, and one request per connection (the next may be for another host)."""
    dropped = {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"}
    kept = [h for h in headers if h.split(b":", 1)[0].strip().lower() not in dropped]
    line = f"{method} {urlunsplit(('', '', path or '/', query, ''))} {version}".encode("latin-1")
    return b"\r\n".join([line, *kept, b"Connection: close"]) + b"\r\n\r\n"


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str, text: str) -> None:
    body = (text + "\n").encode("utf-8")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    writer.write(head.encode("latin-1") + body)
    with contextlib.suppress(ConnectionError):
        await writer.drain()


def open_gate(
    allow: tuple[str, ...],
    folder: Path,
    *,
    clock: Clock | None = None,
    limits: Limits | None = None,
    on_refusal: Callable[[Refusal], None] | None = None,
) -> NetworkGate:
    """Start the gate for a rule allowing ``allow`` (``host:port`` each; EndpointError names a
    bad one) on a new Unix socket in ``folder`` (made 0700 when missing; NotPrivate when it
    is not private). Needs a running asyncio loop: the gate is served in it. The gate closes
    itself when the sandbox it serves ends (or never comes: :attr:`Limits.start_wait`)."""
    endpoints = tuple(dict.fromkeys(parse_endpoint(entry) for entry in allow))
    asyncio.get_running_loop()  # before anything is made: a RuntimeError leaves nothing behind
    private_dir(folder)
    name = f"{PREFIX}{secrets.token_hex(4)}.sock"
    path = Path(folder) / name
    # Reached through the folder's descriptor: a socket's address holds 107 bytes, and a state
    # folder's path may be longer (bubblewrap binds the socket by its path, which may).
    folder_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _remove_stale(folder_fd)
        sock.bind(f"/proc/self/fd/{folder_fd}/{name}")
        os.chmod(path, 0o600)
        sock.listen(128)
        sock.setblocking(False)
        return NetworkGate(
            endpoints, sock, path, clock=clock or SystemClock(), limits=limits or Limits(), on_refusal=on_refusal
        )
    except BaseException:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        raise
    finally:
        os.close(folder_fd)


PREFIX = "net-"


def _remove_stale(folder_fd: int) -> None:
    """Remove the sockets of gates that ended with their engine (nothing listens there)."""
    for name in os.listdir(f"/proc/self/fd/{folder_fd}"):
        if not (name.startswith(PREFIX) and name.endswith(".sock")):
            continue
        where = f"/proc/self/fd/{folder_fd}/{name}"
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(where)
        except ConnectionRefusedError:
            with contextlib.suppress(OSError):
                os.unlink(where)
        except OSError:
            pass  # not a socket: left as it is
        finally:
            probe.close()
