"""The Copilot backend: one ``github-copilot-sdk`` session on a real Copilot CLI.

Sessions of the same agent configuration share one CLI process (server.py): the SDK runs
many sessions on one client, and a CLI costs 290–450 MiB. Stop aborts only its own session;
a Kill (a Stop that escalated) ends the shared CLI, and every other session on it is told.

The backend is the :class:`~polypilot_tui.agents.base.AgentBackend` face of three parts:
:class:`CopilotConnection` joins the shared CLI and attaches the session (and detaches it),
:class:`TurnControl` sends, aborts and answers permission requests, and
:class:`EventIntake` turns what the SDK reports into engine events for the sink.

SDK events arrive on the loop that started the client (the SDK's reader thread uses
``call_soon_threadsafe``); process death is noticed by a watcher thread and the JSON-RPC
close hook, both of which hop onto the loop before touching anything.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from polypilot_tui.agents.base import BackendError, ConnectResult, Diagnostics, EventSink
from polypilot_tui.agents.copilot.busy import BusyFlag
from polypilot_tui.agents.copilot.connection import CopilotConnection
from polypilot_tui.agents.copilot.intake import EventIntake
from polypilot_tui.agents.copilot.model_switch import session_models, switch_model
from polypilot_tui.agents.copilot.turns import TurnControl
from polypilot_tui.agents.reachability import down_because
from polypilot_tui.agents.sandbox import SandboxPlan
from polypilot_tui.agents.sandbox_leftovers import TurnLeftovers
from polypilot_tui.config import AgentConfig, Settings
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.model_choice import ModelChoices
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.tool_servers import ToolServerSource, no_servers
from polypilot_tui.infra.redact import REDACTOR

log = logging.getLogger(__name__)


class CopilotBackend:
    """One SDK session on the Copilot CLI its agent configuration shares."""

    kind = "copilot"

    def __init__(
        self,
        agent: AgentConfig,
        sink: EventSink,
        clock: Clock,
        settings: Settings,
        workdir: Path,
        tool_servers: ToolServerSource = no_servers,
        *,
        sandbox: SandboxPlan | None = None,
    ) -> None:
        # workdir is unused: the CLI keeps its own session state under $COPILOT_HOME.
        REDACTOR.learn_agents([agent])  # what the CLI prints of its key is redacted in our logs
        self.clock = clock
        busy = BusyFlag()
        self.events = EventIntake(sink, busy)
        """The SDK's callbacks (public so tests can feed SDK events without a CLI)."""
        self.connection = CopilotConnection(agent, clock, self.events, busy, self.abort, tool_servers, sandbox)
        """The CLI and the attached session (public so tests can attach a fake session)."""
        self._turns = TurnControl(self.connection, self.events, busy, settings)
        self._leftovers = TurnLeftovers(lambda: self.connection.own_pid) if sandbox is not None else None
        """What a stopped turn's tools left in the sandbox (agents/sandbox_leftovers.py)."""
        self._agent = agent
        self._sink = sink
        self._checking: asyncio.Task[None] | None = None
        self.events.on_unreachable = self._check_model_server

    @property
    def session_id(self) -> str:
        """The attached SDK session's id ("" before connect)."""
        return self.connection.session_id

    @property
    def pid(self) -> int | None:
        """The CLI's process id (for tests and diagnostics)."""
        return self.connection.pid

    @property
    def log_path(self) -> Path | None:
        """``$COPILOT_HOME/session-state/<id>/events.jsonl`` of the attached session."""
        return self.connection.log_path

    def probe(self) -> Probes | None:
        """Process liveness plus a stat (and 8 KiB tail) of the CLI's own event log."""
        return self.connection.probe()

    def diagnostics(self) -> Diagnostics:
        """The CLI's command, its log folder and event log, and the last lines of its stderr."""
        return self.connection.diagnostics()

    async def connect(self, resume_id: str | None) -> ConnectResult:
        """Join (or start) the shared CLI, then create a session or resume ``resume_id`` (handler first)."""
        return await self.connection.connect(resume_id)

    async def send(self, prompt: str) -> None:
        """Hand a prompt to the CLI (ending a leftover turn first); events follow."""
        if self._leftovers is not None:
            self._leftovers.turn_started()
        await self._turns.send(prompt)

    async def abort(self) -> None:
        """Abort the turn and wait until the CLI has ended it (``session.idle``); in a sandbox,
        end what the turn's tools left running there."""
        await self._turns.abort()
        if self._leftovers is not None:
            await asyncio.to_thread(self._leftovers.end)

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        """Answer a pending request (also one that survived a restart) by option id."""
        await self._turns.answer_permission(request_id, option_id)

    async def models(self) -> ModelChoices:
        """The session's model and the CLI's list (with a BYOK provider: what is known, any id allowed)."""
        connection = self.connection
        return await session_models(connection.client, connection.session, connection.configured_model, connection.byok)

    async def set_model(self, model_id: str) -> None:
        """``session.set_model``: from the next message on (the CLI reports ``session.model_change``)."""
        await switch_model(self.connection.session, model_id)

    def _check_model_server(self) -> None:
        """The CLI could not connect to the model server and will retry it (five times, ~23 s):
        one connect of ours tells whether it is down; if so the turn ends now, named."""
        url = self.connection.provider_url
        if url is None or (self._checking is not None and not self._checking.done()):
            return
        self._checking = asyncio.get_running_loop().create_task(self._end_turn_if_down(url), name="copilot-model-check")

    async def _end_turn_if_down(self, url: str) -> None:
        why = await down_because(url)
        if why is None or not self._turns.in_turn:
            return  # it answers (a blip the CLI's retry may get over), or the turn is over already
        log.info("copilot: the model server at %s is down (%s): ending the turn instead of the CLI's retries", url, why)
        try:
            await self._turns.abort_quietly()  # its retries stop; its own idle must not end the next turn
        except BackendError as exc:
            log.warning("copilot: the abort after a failed model connection failed: %s", exc)
        message = (
            f"could not connect to the model server at {url}: {why} "
            "(the Copilot CLI would have retried it for about 25 s; stopped at its first failure)"
        )
        self._sink(AgentEvent(EventType.SESSION_ERROR, {"errorType": "model_unreachable", "message": message}))

    async def kill(self) -> None:
        """SIGKILL the shared CLI and its tools (the other sessions on it are told), report connection.lost."""
        await self.connection.kill()

    async def close(self) -> None:
        """Detach the session and leave the shared CLI (the last one out stops it); never raises."""
        await self.connection.close()
