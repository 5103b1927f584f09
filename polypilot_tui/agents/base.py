"""The contract between the SessionManager and an agent backend.

A backend object drives ONE agent session (one Copilot SDK session, one ACP agent process,
one scripted demo conversation). It reports everything that happens through the event
sink it was built with, in the engine's vocabulary (:mod:`polypilot_tui.domain.events`), on
the asyncio loop that created it. It never touches session state itself: the manager owns
turns, statuses and the watchdog; the backend only talks to the agent.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.infra.private import open_private

if TYPE_CHECKING:  # a headless run imports this module before it starts its agent: only what that needs
    from polypilot_tui.domain.model_choice import ModelChoices
    from polypilot_tui.domain.probes import Probes

EventSink = Callable[[AgentEvent], None]
"""Called by a backend, on the loop, for every agent event (including ``connection.lost``).
The engine's sink never raises: a backend calls it from its SDK's callbacks unguarded."""


class BackendError(Exception):
    """A backend operation failed; the message is shown to the user as is."""


@dataclass(frozen=True)
class ConnectResult:
    """What :meth:`AgentBackend.connect` found.

    ``how`` says in words how the session was attached ("new session", "resumed",
    "loaded (history replayed)", "new session (resume failed: …)") and is shown to the user.
    """

    agent_session_id: str
    how: str
    resumed: bool = False
    interrupted_tool: bool = False
    """The agent's own log ends inside a tool call (#393): abort before the next send."""
    still_processing: bool = False
    """The agent's own log says a turn is still running (restore hint)."""
    lost_turn: bool = False
    """No turn of the session is running in the agent now, though one may have been: its log
    shows a turn that started and never ended, or the agent process is new (ACP). A turn
    restored mid-flight then ends at once, offered for resending."""
    history: tuple[AgentEvent, ...] = field(default_factory=tuple)
    """Past conversation replayed by the agent (ACP ``session/load``), oldest first."""


@dataclass(frozen=True)
class Diagnostics:
    """What a user needs to see when an agent misbehaves (the session details view)."""

    command: str = ""
    """How the agent was started (argv joined), or "" for an in-process agent."""
    log_paths: tuple[tuple[str, str], ...] = ()
    """(what, path) of every log the agent writes: stderr, transcript, its own log folder."""
    stderr_tail: tuple[str, ...] = ()
    """The last lines the agent wrote to stderr (control sequences stripped by the caller)."""


def tail_lines(path: Path, count: int = 20, window: int = 16384) -> tuple[str, ...]:
    """The last ``count`` non-empty lines of a text file (reads at most ``window`` bytes)."""
    try:
        with os.fdopen(open_private(path, os.O_RDONLY), "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - window))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ()
    return tuple(line.rstrip() for line in data.splitlines() if line.strip())[-count:]


class AgentBackend(Protocol):
    """One live connection to one agent session."""

    kind: str
    """"demo", "copilot", "acp" or "replay"."""

    async def connect(self, resume_id: str | None) -> ConnectResult:
        """Start the agent (or attach to it) and open or resume the session.

        The event handler must be registered before any resume call, so nothing the agent
        says during the resume is lost (PolyPilot #373/#559). Returns the id the agent
        chose, which the manager adopts (#382).
        """
        ...

    async def send(self, prompt: str) -> None:
        """Hand a prompt to the agent; returns once it is accepted, events follow."""
        ...

    async def abort(self) -> None:
        """Ask the agent to stop the current turn; the session stays usable."""
        ...

    async def kill(self) -> None:
        """Stop the agent hard (process kill) when abort did not work."""
        ...

    async def close(self) -> None:
        """Detach and release everything. The engine awaits it through ``EngineContext.safe``,
        which logs a failure and goes on: a close need not guard itself."""
        ...

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        """Answer a ``permission.requested`` event with one of its option ids."""
        ...

    def probe(self) -> Probes | None:
        """Cheap liveness facts for the watchdog (process alive, agent log age), or None."""
        ...

    async def models(self) -> ModelChoices:
        """The models the agent offers this (connected) session, and the current one."""
        ...

    async def set_model(self, model_id: str) -> None:
        """Switch the session to ``model_id`` from its next turn on (BackendError when refused)."""
        ...

    def diagnostics(self) -> Diagnostics:
        """How the agent was started, where it logs, and its last stderr lines."""
        ...


class NullBackend:
    """A backend whose agent is its caller: it accepts everything and says nothing unless
    ``sink`` is called. ``polypilot replay`` feeds trace events through it; tests and
    benchmarks push events the same way."""

    kind = "null"

    def __init__(self, sink: EventSink, hints: ConnectResult | None = None) -> None:
        self.sink = sink
        self._hints = hints

    async def connect(self, resume_id: str | None) -> ConnectResult:
        hints = self._hints
        if hints is None:
            return ConnectResult(
                resume_id or "agent-1", "resumed" if resume_id else "new session", resumed=bool(resume_id)
            )
        return ConnectResult(
            resume_id or hints.agent_session_id,
            hints.how,
            resumed=bool(resume_id),
            interrupted_tool=hints.interrupted_tool,
            still_processing=hints.still_processing,
            lost_turn=hints.lost_turn,
        )

    async def send(self, prompt: str) -> None:
        return None

    async def abort(self) -> None:
        return None

    async def kill(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        return None

    def probe(self) -> Probes | None:
        return None

    async def models(self) -> ModelChoices:
        from polypilot_tui.domain.model_choice import ModelChoices

        return ModelChoices(note="this agent offers no model choice")

    async def set_model(self, model_id: str) -> None:
        raise BackendError("this agent offers no model choice")

    def diagnostics(self) -> Diagnostics:
        return Diagnostics()


#: The option ids every backend offers in ``permission.requested`` (ACP agents may add
#: their own; those are passed through by id).
ALLOW_ONCE = "allow_once"
ALLOW_ALWAYS = "allow_always"
REJECT_ONCE = "reject_once"
CANCELLED = "cancelled"
