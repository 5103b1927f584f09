"""The machines of a fleet as a front end sees them: names, targets, health, and when to retry.

A fleet is the local engine ("" — Local) and one engine per host the user added
(``polypilot hosts add NAME [USER@]HOST[:PORT]``). Each host's health is a
:class:`HostHealth`: a small state machine on the one clock, whose :class:`HostView` the
dashboard draws (state, since when, why, last answer, next try). The retry policy is
:class:`Backoff`. Names and targets are checked here, strictly: a target is only ever a user,
a host name or address and a port, so nothing in it can read as an ssh option.
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from enum import StrEnum

from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.patterns import compile_later

LOCAL = ""
"""The name of the local engine (the dashboard's own machine)."""
MAX_HOSTS = 32
"""Hosts a fleet holds at most (each one is an ssh forward and a stream)."""
INSTALL_COMMAND = "pipx install polypilot_tui"
"""How polypilot is installed on a host that lacks it (said with the error)."""
UPGRADE_COMMAND = "pipx upgrade polypilot_tui"
"""How a host's polypilot is brought to this one's version."""

# Compiled on first use: a start that checks no host need not compile them.
_NAME = compile_later(r"[a-z0-9][a-z0-9_-]{0,31}")
_USER = compile_later(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,31}")
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
"""A DNS label, with ``_`` too: an ssh config alias (``Host my_box``) is a target as well."""
_HOSTNAME = compile_later(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_TARGET = compile_later(r"(?:(?P<user>[^@]*)@)?(?P<host>\[[^\]]*\]|[^:@\[\]]*)(?::(?P<port>[0-9]{1,5}))?")
_RESERVED = frozenset({"local", "localhost-engine", "all"})


class HostError(ValueError):
    """A host's name or target is not acceptable; the message says what is wrong and what fits."""


class HostState(StrEnum):
    """Where a host's engine stands, as the dashboard shows it."""

    CONNECTING = "connecting"
    """Being reached (the first time, or again after a loss); its last rows are shown meanwhile."""
    LIVE = "live"
    """Its stream flows: its rows are current."""
    STALE = "stale"
    """It stopped answering: its rows are shown as last seen; it is retried."""
    UNREACHABLE = "unreachable"
    """It could not be reached (ssh's reason, auth refused, polypilot missing there); retried."""
    OTHER_VERSION = "other-version"
    """Its engine speaks another API version: the reason gives the upgrade command; retried slowly."""


@dataclass(frozen=True)
class HostTarget:
    """Where a host is: ``[user@]host[:port]``, each part checked (see :func:`parse_target`)."""

    host: str
    """A DNS name, an IPv4 address or an IPv6 address (without brackets)."""
    user: str = ""
    port: int | None = None

    @property
    def destination(self) -> str:
        """ssh's destination: ``user@host`` or ``host`` (never starts with ``-``)."""
        return f"{self.user}@{self.host}" if self.user else self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        text = f"{self.user}@{host}" if self.user else host
        return f"{text}:{self.port}" if self.port is not None else text


def check_name(name: str) -> str:
    """``name`` when it may name a host: 1-32 of a-z, 0-9, ``-``, ``_``, starting with a letter or
    digit (it is typed on command lines and shown in the sidebar); HostError otherwise."""
    if not _NAME().fullmatch(name):
        raise HostError(
            f"{name!r} cannot name a host: use 1-32 lower-case letters, digits, '-' or '_', starting with a "
            "letter or digit"
        )
    if name in _RESERVED:
        raise HostError(f"{name!r} is reserved (the dashboard's own machine is Local); choose another name")
    return name


def parse_target(text: str) -> HostTarget:
    """``[USER@]HOST[:PORT]`` → a :class:`HostTarget`; HostError naming what is wrong.

    HOST is a DNS name or an ssh config alias (letters, digits, ``_``, ``-`` and dots, no label
    starting or ending with ``-``), an IPv4 address, or an IPv6 address in brackets (``[::1]:2222``); USER is letters,
    digits, ``.``, ``_``, ``-`` not starting with ``-`` or ``.``; PORT is 1-65535. Nothing
    else: no blanks, no leading ``-``, no ssh option can hide in a target.
    """
    fits = "expected [user@]host[:port], e.g. dev@build.example.com:2222 or [::1]:22"
    if text.startswith("-"):
        raise HostError(f"{text!r} would read as an ssh option, not a host: {fits}")
    match = _TARGET().fullmatch(text)
    if not text or len(text) > 300 or match is None:
        raise HostError(f"{text!r} is not a host target: {fits}")
    user, host, port_text = match["user"], match["host"], match["port"]
    if user is not None and not _USER().fullmatch(user):
        raise HostError(f"{text!r}: the user {user!r} is not a user name (letters, digits, '.', '_', '-')")
    if host.startswith("["):
        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise HostError(f"{text!r}: {host} is not an IPv6 address") from None
        host = str(address)
    elif not _HOSTNAME().fullmatch(host) or host.replace(".", "").isdigit() and not _ipv4(host):
        raise HostError(f"{text!r}: {host!r} is not a host name or address; {fits}")
    port = int(port_text) if port_text else None
    if port is not None and not 0 < port < 65536:
        raise HostError(f"{text!r}: port {port} is out of range (1-65535)")
    return HostTarget(host=host, user=user or "", port=port)


def _ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class HostView:
    """One machine of the fleet as the dashboard draws it."""

    name: str
    """"" for Local."""
    target: str
    """``user@host:port`` as added ("" for Local)."""
    state: HostState
    since: float
    """When it entered ``state`` (the fleet's clock)."""
    reason: str = ""
    """Why it is not live, for people: ssh's own words, "auth refused", "polypilot is not
    installed there: <install command>", "its engine speaks API v2, this dashboard v1: <upgrade
    command>"."""
    last_seen: float | None = None
    """When its engine last answered (None: never, since the dashboard started)."""
    retry_at: float | None = None
    """When it is tried again (None: being tried, or live)."""
    sessions: int = 0
    """Its sessions listed (as last seen when not live)."""

    @property
    def live(self) -> bool:
        return self.state is HostState.LIVE

    @property
    def label(self) -> str:
        """What the sidebar calls it: its name, or "Local"."""
        return self.name or "Local"


@dataclass(frozen=True)
class Backoff:
    """How long to wait before the next try after ``failures`` failed ones in a row:
    ``first`` × ``factor`` ** (failures - 1), at most ``cap`` seconds (no wait before the first try)."""

    first: float = 1.0
    factor: float = 2.0
    cap: float = 30.0

    def delay(self, failures: int) -> float:
        if failures <= 0:
            return 0.0
        return float(min(self.cap, self.first * self.factor ** min(failures - 1, 32)))


def other_version_backoff() -> Backoff:
    """Another API version does not fix itself in seconds: tried again rarely (an upgrade is seen).
    (Made when needed: a module-level instance would make its class at import, for every start.)"""
    return Backoff(first=30.0, factor=2.0, cap=300.0)


class HostHealth:
    """One host's state on ``clock``: what each try and each loss makes of it, and when to try again."""

    def __init__(self, name: str, target: str, clock: Clock, backoff: Backoff | None = None) -> None:
        self._clock = clock
        self._backoff = backoff or Backoff()
        self.failures = 0
        """Failed tries since it was last live."""
        self.view = HostView(name=name, target=target, state=HostState.CONNECTING, since=clock.now())

    def _enter(self, state: HostState, reason: str, retry_at: float | None) -> HostView:
        since = self.view.since if state is self.view.state else self._clock.now()
        self.view = replace(self.view, state=state, since=since, reason=reason, retry_at=retry_at)
        return self.view

    def connecting(self) -> HostView:
        """A try begins (the reason of the last failure stays shown until it succeeds or fails)."""
        if self.view.state in (HostState.LIVE, HostState.CONNECTING):
            return self._enter(HostState.CONNECTING, "", None)
        self.view = replace(self.view, retry_at=None)
        return self.view

    def live(self) -> HostView:
        """Its engine answered with its sessions: current from now."""
        self.failures = 0
        self.view = replace(self.view, last_seen=self._clock.now())
        return self._enter(HostState.LIVE, "", None)

    def seen(self) -> None:
        """Its engine said something (a record, a keepalive): the last time it answered."""
        self.view = replace(self.view, last_seen=self._clock.now())

    def lost(self, reason: str) -> HostView:
        """A live host stopped answering: stale, tried again at once (a dropped link often is back)."""
        self.failures = 0
        return self._enter(HostState.STALE, reason, self._clock.now())

    def failed(self, reason: str, state: HostState = HostState.UNREACHABLE) -> HostView:
        """A try failed: ``state`` (a host seen before stays stale), retried after the backoff."""
        self.failures += 1
        backoff = other_version_backoff() if state is HostState.OTHER_VERSION else self._backoff
        if state is HostState.UNREACHABLE and self.view.last_seen is not None:
            state = HostState.STALE
        return self._enter(state, reason, self._clock.now() + backoff.delay(self.failures))

    def counted(self, sessions: int) -> HostView:
        """Its sessions listed now."""
        if sessions != self.view.sessions:
            self.view = replace(self.view, sessions=sessions)
        return self.view

    def wait(self) -> float:
        """Seconds until the next try (0: now)."""
        at = self.view.retry_at
        return 0.0 if at is None else max(0.0, at - self._clock.now())


AUTH_REFUSED = "auth refused"


def classify_failure(said: str, exit_code: int | None = None) -> tuple[HostState, str]:
    """A failed try's state and its reason for people, from ssh's words (and its exit code).

    ``Permission denied`` is "auth refused (ssh's words)"; a missing ``polypilot`` (exit 127
    or "command not found") names the install command; anything else is ssh's own words.
    """
    low = said.lower()
    if "permission denied" in low and ("publickey" in low or "password" in low or "keyboard" in low):
        return HostState.UNREACHABLE, f"{AUTH_REFUSED}: {said}"
    if exit_code == 127 or "command not found" in low or "remote command was not found" in low:
        return HostState.UNREACHABLE, (
            f"polypilot is not installed there: `{INSTALL_COMMAND}` on that host "
            f"(or give its path: polypilot hosts add NAME TARGET --remote-command PATH) — {said}"
        )
    return HostState.UNREACHABLE, said


def other_version_reason(theirs: int | None, ours: int) -> str:
    """The reason of a host whose engine speaks another API version (None: it did not say which)."""
    spoken = f"API v{theirs}" if theirs is not None else "another API version"
    return f"its engine speaks {spoken}, this dashboard v{ours}: run `{UPGRADE_COMMAND}` there (and here)"


DEFAULT_REMOTE_COMMAND = "polypilot"
_BAD_TEXT = compile_later(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class HostEntry:
    """A host as the hosts file keeps it: its name, where it is, how polypilot runs there, and
    extra options for ssh (e.g. ``-F FILE``; the user's ssh config does the rest)."""

    name: str
    target: str
    remote_command: str = DEFAULT_REMOTE_COMMAND
    ssh_options: tuple[str, ...] = ()

    @classmethod
    def checked(
        cls, name: str, target: str, remote_command: str = DEFAULT_REMOTE_COMMAND, ssh_options: tuple[str, ...] = ()
    ) -> HostEntry:
        """An entry whose every part was checked (HostError naming the part otherwise); the
        target is kept as :func:`parse_target` reads it."""
        if not remote_command.strip() or len(remote_command) > 1000 or _BAD_TEXT().search(remote_command):
            raise HostError(f"the remote command {remote_command!r} must be one line of at most 1,000 characters")
        for i, word in enumerate(ssh_options):
            argument = i > 0 and len(ssh_options[i - 1]) == 2 and ssh_options[i - 1].startswith("-")
            if not (word.startswith("-") or argument) or len(word) > 1000 or _BAD_TEXT().search(word):
                raise HostError(
                    f"the ssh option {word!r} must start with '-' (or be the argument of one like -F) and be one line"
                )
        return cls(check_name(name), str(parse_target(target)), remote_command, tuple(ssh_options))

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "target": self.target,
            "remote_command": self.remote_command,
            "ssh_options": list(self.ssh_options),
        }

    @classmethod
    def from_json(cls, data: object) -> HostEntry:
        """The entry ``data`` (a JSON object) holds, checked; HostError saying what is wrong."""
        if not isinstance(data, dict):
            raise HostError("a host must be an object with a name and a target")
        name, target = data.get("name"), data.get("target")
        command = data.get("remote_command", DEFAULT_REMOTE_COMMAND)
        options = data.get("ssh_options", [])
        if not isinstance(name, str) or not isinstance(target, str) or not isinstance(command, str):
            raise HostError("a host's name, target and remote_command must be strings")
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            raise HostError(f"host {name!r}: ssh_options must be a list of strings")
        return cls.checked(name, target, command, tuple(options))


def entries_from_json(data: object) -> list[HostEntry]:
    """The hosts file's entries (``{"hosts": [...]}``), every one checked, names unique."""
    hosts = data.get("hosts") if isinstance(data, dict) else None
    if not isinstance(hosts, list):
        raise HostError('expected {"hosts": [...]}')
    entries = [HostEntry.from_json(item) for item in hosts]
    names = [e.name for e in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise HostError(f"host {twice[0]!r} is listed twice")
    if len(entries) > MAX_HOSTS:
        raise HostError(f"{len(entries)} hosts: at most {MAX_HOSTS}")
    return entries
