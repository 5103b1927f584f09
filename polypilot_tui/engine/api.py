"""What a front end needs of an engine, wherever it runs.

The dashboard (and every command) drives an :class:`Engine`: the engine in this process
(:class:`~polypilot_tui.engine.local.LocalEngine`) or one in another process, reached over its
socket (:class:`~polypilot_tui.service.remote.RemoteEngine`). Reads are answered at once from
what the engine last said (the views, the history, the streaming text), so a redraw never
waits on a socket; every command and one-shot query is a :class:`Verb` (all declared in
engine/verbs.py), asked through the one door :meth:`Engine.call`. Changes arrive as the
records of :mod:`polypilot_tui.domain.records`, problems worth telling as notices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any, Generic, Literal, Protocol, TypeVar, cast

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.hosts import LOCAL, HostView
from polypilot_tui.domain.records import Record
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine.stream import Listener, Unsubscribe
from polypilot_tui.storage.notices import NoticeListener

Q = TypeVar("Q")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class EngineError(Exception):
    """The engine refused or could not do what was asked (the message says why, for people)."""

    status = 409
    """The HTTP status the engine service answers it with: it cannot do that now."""


class UnknownSession(EngineError):
    """No session has that id (closed meanwhile, or never there)."""

    status = 404


class BadRequest(EngineError):
    """The request itself is wrong (a field missing or of another type, a negative count)."""

    status = 400


class UnknownGroup(EngineError):
    """No fan-out group has that id."""

    status = 404


class ReadingGone(EngineError):
    """A later page was asked of a reading the engine no longer keeps: read again from the start."""

    status = 410


class UnknownCapability(EngineError):
    """A team tool call with a capability the engine did not give (or took back): nothing more is said."""

    status = 403


@dataclass(frozen=True)
class Verb(Generic[Q, R_co]):
    """One thing a front end asks of an engine, and how it travels."""

    name: str
    """The engine's method that answers it (LocalEngine.<name>)."""
    method: Literal["GET", "POST"]
    path: str
    """Under ``/v1``; ``{field}`` is a field of the request (the session's id)."""
    request: type[Q]
    reply: Any
    """The reply's type (``R_co``), as the codec reads it."""
    summary: str
    """One line for docs/engine-api.md."""
    errors: tuple[type[EngineError], ...] = ()
    """The refusals it may answer besides a malformed request (each has its HTTP status)."""
    command: str | None = None
    """The ``polypilot`` subcommand that exposes it, if one does."""
    wrap: str | None = "result"
    """The answer is ``{wrap: reply}``; None: the reply itself is the answer."""
    status: int = 200
    """The HTTP status of its answer."""

    @property
    def path_fields(self) -> tuple[str, ...]:
        """The request's fields that travel in the path (the rest in the body or the query)."""
        return tuple(f.name for f in fields(self.request) if "{" + f.name + "}" in self.path)  # type: ignore[arg-type]

    def refusal(self, status: int) -> type[EngineError]:
        """The error a refusal with ``status`` stands for."""
        known: tuple[type[EngineError], ...] = (*self.errors, BadRequest)
        for error in known:
            if error.status == status:
                return error
        return EngineError


class Engine(Protocol):
    """Sessions to read and drive; every change comes back through :meth:`subscribe`."""

    @property
    def clock(self) -> Clock:
        """The engine's clock: the times in its views are read against it."""

    @property
    def separate(self) -> bool:
        """The engine runs in a process of its own: quitting a front end leaves its sessions running."""

    @property
    def persistent(self) -> bool:
        """Sessions are saved (a front end then saves where the user was, too)."""

    # ---- reads: what the engine last said, answered at once -------------------------
    def ids(self) -> list[str]: ...
    def view(self, session_id: str) -> SessionView: ...
    def views(self) -> tuple[SessionView, ...]: ...
    def history(self, session_id: str) -> Sequence[ChatItem]:
        """Every row (rows saved before a restart may be read from disk as they are looked at)."""

    def streaming_text(self, session_id: str) -> str: ...
    def subscribe(self, listener: Listener, *kinds: type[Record]) -> Unsubscribe: ...
    def on_notice(self, listener: NoticeListener) -> Unsubscribe:
        """Call ``listener`` with every notice so far (saving, restore, engine problems) and later."""

    def alerts_here(self) -> bool:
        """Attention alerts (bell, toast) belong to this front end: its terminal had the focus
        last among those attached."""

    async def focus(self) -> None:
        """This front end's terminal has the focus now (the FOCUS_CLIENT verb, with its client)."""

    # ---- machines: a fleet (service/fleet.py) answers these; a single engine the trivial thing
    def hosts(self) -> tuple[HostView, ...]:
        """The machines whose sessions :meth:`views` lists, Local first; ``()`` for a single
        engine (nothing to group by). A :class:`~polypilot_tui.domain.records.HostChanged`
        record says when one of them changed."""

    def host_of(self, session_id: str) -> str:
        """The name of the host the session runs on ("" for Local, and for a single engine)."""

    def member(self, host: str) -> Engine:
        """The engine of one host ("" Local), for the verbs that name no session (a new session,
        the agents, folders, fan-outs); a single engine is its own member for "". KeyError for
        a host it does not have."""

    # ---- life --------------------------------------------------------------------------
    async def start(self) -> None:
        """Restore or fetch the sessions; reads work from here on."""

    async def detach(self, stop_engine: bool) -> None:
        """This front end leaves; with ``stop_engine`` the engine ends too (turns in flight
        end as interrupted, offered for resending at the next start)."""

    # ---- the verbs (engine/verbs.py): every command and one-shot query -----------------
    async def call(self, verb: Verb[Q, R], request: Q) -> R:
        """Ask ``verb`` of the engine; its reply, or the EngineError it answered."""


class OneMachine:
    """What an engine that is not a fleet answers of machines: none to group by, every session
    Local, itself the member for Local."""

    def hosts(self) -> tuple[HostView, ...]:
        return ()

    def host_of(self, session_id: str) -> str:
        return LOCAL

    def member(self, host: str) -> Engine:
        if host != LOCAL:
            raise KeyError(f"no host {host!r}: this dashboard drives one engine")
        return cast(Engine, self)
