"""What a session's sandbox allows: the choice a user makes and the rules it becomes.

The choice (:class:`Sandbox`) is saved with the session and never changed by recovery: a
session made sandboxed is restored sandboxed, or not started. The rules (:class:`SandboxRules`)
are what the launcher (agents/sandbox.py) turns into a bubblewrap command line and what the
``allow-in-sandbox`` permission policy asks before it approves: a path the agent may write.
Paths here are plain absolute POSIX strings; nothing in this module touches the file system.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from enum import StrEnum

from polypilot_tui.domain.dataclass_on_use import dataclass


class SandboxMode(StrEnum):
    """How much of the machine a session's agent may change."""

    OFF = "off"
    """As the user's own programs (today's behaviour)."""
    WORKSPACE = "workspace"
    """Writes only its folder or worktree, its own state folders and a private /tmp; the rest
    of the file system read-only, the secrets folders and polypilot's own folders hidden."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A session's sandbox as chosen (new-session dialog, agents file, ``--sandbox``)."""

    mode: SandboxMode = SandboxMode.OFF
    network: tuple[str, ...] | None = None
    """None: the network as the machine has it. A tuple: only these ``host:port`` endpoints
    (and the agent's model endpoint) are reachable, through a proxy; nothing else is."""

    @property
    def on(self) -> bool:
        return self.mode is not SandboxMode.OFF

    def label(self) -> str:
        """Short words for a header or a list ("" when off)."""
        if not self.on:
            return ""
        return "sandbox" if self.network is None else "sandbox · net rule"


NO_SANDBOX = Sandbox()


def chosen(asked: Sandbox | None, agent_mode: str, agent_network: Sequence[str] | None) -> Sandbox:
    """The sandbox a new session gets: the one ``asked`` for, else its agent's own (the agents
    file's ``sandbox`` and ``network``). A sandbox asked for without a network rule keeps the
    agent's: choosing the sandbox never drops the rule."""
    network = tuple(agent_network) if agent_network is not None else None
    sandbox = asked if asked is not None else Sandbox(SandboxMode(agent_mode), network)
    if sandbox.on and sandbox.network is None and network is not None:
        return Sandbox(sandbox.mode, network)
    return sandbox


def normal(path: str) -> str:
    """``path`` made absolute-looking and normalised (no ``..``, no trailing slash)."""
    return posixpath.normpath(path) if path.startswith("/") else posixpath.normpath("/" + path)


def within(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies under it (lexically: links are the launcher's business,
    which binds real paths)."""
    path, folder = normal(path), normal(folder)
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@dataclass(frozen=True)
class SandboxRules:
    """What one sandboxed agent process may see and change."""

    writable: tuple[str, ...]
    """Folders it may write (its workspace first, then its own state folders)."""
    protected: tuple[str, ...] = ()
    """Paths under a writable folder kept read-only (a repository's hooks and config: a hook
    written by the agent would run outside the sandbox at the user's next commit)."""
    hidden: tuple[str, ...] = ()
    """Folders and files it may not see at all (secrets, polypilot's own folders)."""
    network: tuple[str, ...] | None = None
    """As :attr:`Sandbox.network`, the model endpoint included."""
    model_endpoints: tuple[str, ...] = ()
    """The agent's model endpoints among ``network``, as its configuration names them (none:
    not known, and the rule must list them)."""

    def may_write(self, path: str) -> bool:
        """The sandbox lets the agent write ``path`` (an absolute path)."""
        if any(within(path, p) for p in self.hidden + self.protected):
            return False
        return any(within(path, w) for w in self.writable)

    def may_read(self, path: str) -> bool:
        """The sandbox lets the agent see ``path`` (an absolute path): it is not hidden."""
        return not any(within(path, p) for p in self.hidden)

    def lines(self) -> tuple[str, ...]:
        """The rules in words, one per line (F2's details)."""
        said = [f"writes: {w}" for w in self.writable]
        said += [f"read-only: {p}" for p in self.protected]
        said += [f"hidden: {h}" for h in self.hidden]
        said.append("the rest of the file system: read-only")
        if self.network is None:
            said.append("network: as the machine's")
        else:
            said.append("network: only " + (", ".join(self.network) or "none"))
            if not self.model_endpoints:
                said.append("network: the agent's model endpoint is not known; list its host:port in the rule")
        return tuple(said)
