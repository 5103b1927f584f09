"""Handing each session's agent its tool servers, and checking that the team tools arrived.

The engine asks :attr:`ToolHandoff.servers_for` (the team desk's, when it runs) each time a
session's agent opens its session — new, resumed or loaded, reconnected — and the backend
hands the answer to the agent (ACP ``mcpServers``, the Copilot SDK's ``mcp_servers``). Before
any of it leaves the engine, the redactor learns every value of the servers' env: a relay's
capability is a secret, and ACP transcripts record ``session/new`` whole.

An agent may ignore what it is handed (the Copilot CLI's ``--acp`` mode drops ``mcpServers``;
an MCP server may fail to start). The relay says hello (``TEAM_HELLO``) when the agent lists
its tools. Some agents start their tool servers with the session, others (the Copilot CLI)
only with its first turn: a session handed a relay that has not said hello within
``Settings.team_tools_seconds`` of its connect, or of the first turn sent after it, is told so
in its chat, naming the agent — never silently, and never while an idle agent may yet list them.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable

from polypilot_tui.agents.base import BackendError
from polypilot_tui.domain.clock import TimerHandle
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.records import ActionTaken, EngineAction, Record
from polypilot_tui.domain.tool_servers import ToolServer, ToolServerSource, capability_of, checked, no_tool_servers
from polypilot_tui.engine.api import UnknownCapability
from polypilot_tui.engine.context import EngineContext
from polypilot_tui.infra.redact import REDACTOR

log = logging.getLogger(__name__)


@dataclass
class _Expected:
    """A relay handed to a session's agent whose hello is awaited (or came)."""

    capability: str
    handed_at: float
    timer: TimerHandle | None
    sent_at: float | None = None
    """When the first turn after the connect was sent (an agent may list its tools only then)."""
    arrived: bool = False
    overdue: bool = False
    """The session was told the tools did not arrive (a late hello says they did after all)."""


class ToolHandoff:
    """Asks for each session's tool servers at every connect and watches the relay's hello."""

    def __init__(self, ctx: EngineContext) -> None:
        self._ctx = ctx
        self.servers_for: Callable[[str], tuple[ToolServer, ...]] = no_tool_servers
        """The tool servers of a session's agent (``SessionManager.tool_servers``)."""
        self._expected: dict[str, _Expected] = {}
        ctx.stream.subscribe(self._on_action, ActionTaken)

    def source(self, session_id: str) -> ToolServerSource:
        """What the session's backend asks at each open of its agent's session."""
        return lambda: self.hand(session_id)

    def hand(self, session_id: str) -> tuple[ToolServer, ...]:
        """The session's tool servers, checked, their secrets known to the redactor, and the
        relay's hello awaited from now. A server that cannot be handed fails the connect."""
        try:
            servers = checked(tuple(self.servers_for(session_id)))
        except ValueError as exc:
            raise BackendError(f"the session's tool servers cannot be handed to its agent: {exc}") from None
        REDACTOR.learn(secret for server in servers for secret in server.secrets)
        self._await_hello(session_id, capability_of(servers))
        return servers

    def arrived(self, capability: str) -> str:
        """The relay with ``capability`` said hello: its session's tools arrived. Returns the
        session's id; UnknownCapability when no session was handed it."""
        for session_id, expected in self._expected.items():
            if hmac.compare_digest(expected.capability.encode(), capability.encode()):
                self._arrived(session_id, expected)
                return session_id
        raise UnknownCapability("unknown capability")

    def expecting(self, session_id: str) -> bool:
        """The session was handed a relay whose hello has not come (yet)."""
        expected = self._expected.get(session_id)
        return expected is not None and not expected.arrived

    def forget(self, session_id: str) -> None:
        """The session is closed: nothing is awaited of it any more."""
        expected = self._expected.pop(session_id, None)
        if expected is not None and expected.timer is not None:
            expected.timer.cancel()

    # ---- internals -------------------------------------------------------------------
    def _await_hello(self, session_id: str, capability: str) -> None:
        self.forget(session_id)  # a new connect: the relay of the one before is gone with its agent
        if not capability:
            return
        expected = _Expected(capability, self._ctx.clock.now(), None)
        self._arm(session_id, expected)
        self._expected[session_id] = expected

    def _on_action(self, change: Record) -> None:
        """A turn sent after the connect: an agent that starts its tool servers with its first
        turn has the bound from now."""
        if not isinstance(change, ActionTaken) or change.action not in (EngineAction.SEND, EngineAction.RESEND):
            return
        expected = self._expected.get(change.session_id)
        if expected is None or expected.arrived or expected.overdue or expected.sent_at is not None:
            return
        expected.sent_at = self._ctx.clock.now()
        self._arm(change.session_id, expected)

    def _arm(self, session_id: str, expected: _Expected) -> None:
        """The hello is overdue ``team_tools_seconds`` from now (the bound armed before is dropped)."""
        if expected.timer is not None:
            expected.timer.cancel()
        clock = self._ctx.clock
        bound = self._ctx.settings.team_tools_seconds
        expected.timer = clock.call_at(clock.now() + bound, lambda: self._overdue(session_id, expected))

    def _arrived(self, session_id: str, expected: _Expected) -> None:
        if expected.timer is not None:
            expected.timer.cancel()
            expected.timer = None
        if expected.arrived:
            return
        expected.arrived = True
        managed = self._ctx.sessions.get(session_id)
        if managed is None:
            return
        seconds = self._ctx.clock.now() - (expected.sent_at if expected.sent_at is not None else expected.handed_at)
        log.info("session %s: the team tools reached %s in %.1f s", session_id, managed.session.agent, seconds)
        if expected.overdue:
            managed.session.system(
                f"✓ The team tools reached {managed.session.agent} after all ({seconds:.0f} s).", self._ctx.clock.wall()
            )
            self._ctx.changed(session_id)

    def _overdue(self, session_id: str, expected: _Expected) -> None:
        expected.timer = None
        managed = self._ctx.sessions.get(session_id)
        if self._expected.get(session_id) is not expected or expected.arrived or managed is None:
            return
        if expected.sent_at is None:
            return  # no turn yet: an agent may list its tools with its first one (which arms the bound)
        expected.overdue = True
        agent = managed.session.agent
        bound = self._ctx.settings.team_tools_seconds
        log.warning("session %s: %s did not list the team tools within %g s", session_id, agent, bound)
        managed.session.error(
            f"⚠ The team tools did not reach {agent} within {bound:g} s: this session cannot start or "
            f"reach workers. {agent} did not start polypilot's tool server or did not list its tools "
            "(its log, F2, may say why). Reconnect the session to hand them again.",
            self._ctx.clock.wall(),
        )
        self._ctx.changed(session_id)
