"""ACP backend: one Agent Client Protocol agent process per session (opencode, codex-acp…).

Built on ``agent-client-protocol`` 0.12.1 with the traps of ``reference/acp.md`` handled
by its parts: :class:`AgentLink` runs the process (stderr drained into a capped, redacted
log, the environment passed explicitly, every raw message kept in a JSONL transcript, lines
with invalid UTF-8 decoded with replacement), :class:`SessionOpener` resumes, loads or
creates the session, :class:`TurnControl` sends and cancels prompts (Stop answers open
permission prompts itself: the SDK ignores ``$/cancel_request``), and
:class:`StreamIntake` maps updates from the raw stream (the SDK drops what fails its
schema). Permission requests for unknown tool ids are accepted (:class:`PermissionDesk`).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from acp.schema import AgentCapabilities

from polypilot_tui.agents.acp.client import AcpClient, PermissionDesk
from polypilot_tui.agents.acp.intake import StreamIntake
from polypilot_tui.agents.acp.link import STDERR_LOG, TRANSCRIPT, AgentLink
from polypilot_tui.agents.acp.model_switch import SessionModels
from polypilot_tui.agents.acp.opening import SessionOpener
from polypilot_tui.agents.acp.turns import TurnControl
from polypilot_tui.agents.base import ConnectResult, Diagnostics, EventSink
from polypilot_tui.agents.sandbox import SandboxPlan
from polypilot_tui.agents.sandbox_leftovers import TurnLeftovers
from polypilot_tui.config import AgentConfig, Settings
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.model_choice import ModelChoices
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.tool_servers import ToolServerSource, no_servers
from polypilot_tui.infra.redact import REDACTOR

__all__ = ["STDERR_LOG", "TRANSCRIPT", "AcpBackend"]

logger = logging.getLogger(__name__)


class AcpBackend:
    """One ACP agent process driving one session (see :class:`AgentBackend`)."""

    kind = "acp"

    def __init__(
        self,
        agent: AgentConfig,
        sink: EventSink,
        clock: Clock,
        settings: Settings,
        workdir: Path,
        *,
        cwd: Path | None = None,
        prefer_load: bool = False,
        tool_servers: ToolServerSource = no_servers,
        sandbox: SandboxPlan | None = None,
    ) -> None:
        REDACTOR.learn_agents([agent])  # what the agent echoes of its key is redacted wherever it lands
        self._clock = clock
        root = Path(cwd or agent.cwd or Path.cwd()).expanduser().resolve()
        # The intake reads the session id from the link, which needs the intake to exist first.
        self._sink = sink
        self._intake = StreamIntake(self._watch_models, clock, lambda: self._link.session_id)
        self._desk = PermissionDesk(self._intake.emit, self._intake.permission_tool)
        self._link = AgentLink(
            agent,
            AcpClient(root, self._desk, sandbox.rules if sandbox is not None else None),
            clock,
            Path(workdir),
            root,
            on_message=self._intake.on_message,
            on_lost=self._on_lost,
            sandbox=sandbox,
        )
        self._opener = SessionOpener(self._link, self._intake, root, prefer_load, tool_servers)
        self._models = SessionModels(self._link)
        self._turns = TurnControl(
            self._link, self._intake, self._desk, clock, settings, reconnect=self.connect, kill=self.kill
        )
        self._leftovers = TurnLeftovers(lambda: self.pid) if sandbox is not None else None
        """What a stopped turn's tools left in the sandbox (agents/sandbox_leftovers.py)."""

    @property
    def session_id(self) -> str | None:
        """The agent's id of the open session (None before connect)."""
        return self._link.session_id

    @property
    def pid(self) -> int | None:
        """The agent process id (None before connect)."""
        proc = self._link.proc
        return proc.pid if proc is not None else None

    @property
    def capabilities(self) -> AgentCapabilities | None:
        """What the agent said it can do at initialize (None before connect)."""
        return self._opener.capabilities

    # ------------------------------------------------------------------ contract

    async def connect(self, resume_id: str | None) -> ConnectResult:
        """Start a new agent process and resume, load or create the session on it."""
        await self._teardown()
        await self._link.spawn()
        self._intake.mark_alive()
        try:
            result = await self._opener.open(resume_id)
        except BaseException:
            await self._teardown()
            raise
        self._link.mark_ready()
        self._intake.reset_mapper()
        self._models.update(self._opener.config_options)
        if self._models.current():  # the view names the model the agent really runs
            self._intake.emit(AgentEvent(EventType.SESSION_MODEL_CHANGE, {"newModel": self._models.current()}))
        logger.info("ACP session %s: %s", result.agent_session_id, result.how)
        return result

    async def send(self, prompt: str) -> None:
        """Start a turn; returns once the prompt is on the wire (events follow)."""
        if self._leftovers is not None:
            self._leftovers.turn_started()
        await self._turns.send(prompt)

    async def abort(self) -> None:
        """Cancel the running turn (killing the agent if it does not stop in time); in a
        sandbox, end what the turn's tools left running there."""
        await self._turns.abort()
        if self._leftovers is not None:
            await asyncio.to_thread(self._leftovers.end)

    async def kill(self) -> None:
        """Kill the agent process; open permission prompts are cancelled, the loss reported."""
        self._desk.cancel_all()
        await self._link.kill()

    async def close(self) -> None:
        """Stop everything of this backend quietly."""
        self._desk.cancel_all(emit=False)
        await self._teardown()

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        """Answer a pending permission request with one of its option ids."""
        await self._turns.answer_permission(request_id, option_id)

    async def models(self) -> ModelChoices:
        """The agent's model select for this session (``configOptions``, category ``model``)."""
        return self._models.choices()

    async def set_model(self, model_id: str) -> None:
        """``session/set_config_option`` on the model select; applies from the next prompt."""
        await self._models.switch(model_id)

    def probe(self) -> Probes | None:
        """Whether the agent process is alive, and how long it has been silent."""
        last = self._intake.last_inbound
        age = None if last is None else max(0.0, self._clock.now() - last)
        return Probes(agent_alive=self._link.alive, log_age=age)

    def diagnostics(self) -> Diagnostics:
        """The agent's argv, its stderr log and raw transcript, and the last stderr lines."""
        return self._link.diagnostics()

    # ------------------------------------------------------------------ internals

    async def _teardown(self) -> None:
        """Stop the prompt, the watcher and the process of the current generation; safe twice."""
        self._link.invalidate()
        self._desk.cancel_all(emit=False)
        await self._turns.cancel_prompt()
        await self._link.shut_down()

    def _watch_models(self, event: AgentEvent) -> None:
        """Every event on its way to the engine; an agent that changes its model itself is followed."""
        self._sink(event)
        if event.type == "config_option_update" and self._models.update_from_wire(event.get("configOptions")):
            self._sink(AgentEvent(EventType.SESSION_MODEL_CHANGE, {"newModel": self._models.current()}))

    def _on_lost(self, reason: str) -> None:
        """The link lost its process: open prompts are cancelled, then the loss is reported."""
        self._desk.cancel_all()
        self._intake.connection_lost(reason)
