"""What a front end needs of an engine, wherever it runs.

The dashboard (and every command) drives an :class:`Engine`: the engine in this process
(:class:`~polypilot_tui.engine.local.LocalEngine`) or one in another process, reached over its
socket (:class:`~polypilot_tui.service.client.RemoteEngine`). Reads are answered at once from
what the engine last said (the views, the history, the streaming text), so a redraw never
waits on a socket; everything that changes a session is a coroutine. Changes arrive as the
records of :mod:`polypilot_tui.domain.changes`, problems worth telling as notices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from polypilot_tui.domain.agents import AgentOffer
from polypilot_tui.domain.changes import Change
from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.model_choice import ModelChoices
from polypilot_tui.domain.view import SessionDetails, SessionView
from polypilot_tui.domain.workspace import Workspace
from polypilot_tui.engine.stream import Listener, Unsubscribe
from polypilot_tui.storage.notices import NoticeListener


class EngineError(Exception):
    """The engine refused or could not do what was asked (the message says why, for people)."""


class UnknownSession(EngineError):
    """No session has that id (closed meanwhile, or never there)."""


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
    def subscribe(self, listener: Listener, *kinds: type[Change]) -> Unsubscribe: ...
    def on_notice(self, listener: NoticeListener) -> Unsubscribe:
        """Call ``listener`` with every notice so far (saving, restore, engine problems) and later."""

    def alerts_here(self) -> bool:
        """Attention alerts (bell, toast) belong to this front end: its terminal had the focus
        last among those attached."""

    async def focus(self) -> None:
        """This front end's terminal has the focus now."""

    # ---- life --------------------------------------------------------------------------
    async def start(self) -> None:
        """Restore or fetch the sessions; reads work from here on."""

    async def detach(self, stop_engine: bool) -> None:
        """This front end leaves; with ``stop_engine`` the engine ends too (turns in flight
        end as interrupted, offered for resending at the next start)."""

    # ---- commands ------------------------------------------------------------------------
    async def new_session(self, agent: str, name: str | None = None, workspace: Workspace | None = None) -> str:
        """Add a session (its agent connects in the background); returns its id."""

    async def send(self, session_id: str, prompt: str) -> str:
        """Send, or queue while a turn runs: "sent" or "queued"."""

    async def unqueue(self, session_id: str, index: int, expected: str | None = None) -> str | None: ...
    async def send_queued(self, session_id: str) -> bool: ...
    async def stop(self, session_id: str) -> None: ...
    async def reconnect(self, session_id: str) -> None: ...
    async def resend_interrupted(self, session_id: str) -> bool: ...
    async def answer_permission(self, session_id: str, request_id: str, option_id: str) -> None: ...
    async def rename(self, session_id: str, name: str) -> None: ...
    async def close_session(self, session_id: str) -> bool:
        """Stop and close a session; it can be reopened for a while (undo)."""

    async def reopen(self, session_id: str, position: int | None = None) -> None: ...
    async def details(self, session_id: str) -> SessionDetails: ...
    async def agents(self) -> tuple[AgentOffer, ...]:
        """The agents the engine offers, and whether each can start where it runs."""

    async def refresh_changes(self, session_id: str) -> None:
        """Count the session's changes in its folder again (after a commit, a merge)."""

    # ---- models ("Switch model…") ---------------------------------------------------------
    async def models(self, session_id: str) -> ModelChoices:
        """The models the session's agent offers and the current one (connects the agent first)."""

    async def set_model(self, session_id: str, model_id: str) -> None:
        """Switch the session's model from its next turn on; refused while a turn runs; kept across restarts."""
