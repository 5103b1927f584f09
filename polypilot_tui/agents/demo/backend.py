"""The demo agent: offline, in-process, scripted — and able to fail on purpose.

It behaves like a small Copilot CLI: it streams replies, runs (pretend) tools, asks for
permission, and writes an ``events.jsonl`` of its non-ephemeral events in the session's
folder, which is what restore hints and the interrupted-tool scan read after a restart.
Named fault scripts (``!zero-idle``, ``!dead-send`` …) make every recovery path visible.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path
from typing import Any

from polypilot_tui.agents import agent_log
from polypilot_tui.agents.base import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    CANCELLED,
    REJECT_ONCE,
    BackendError,
    ConnectResult,
    Diagnostics,
    EventSink,
)
from polypilot_tui.agents.demo.scripts import SCRIPTS, pick_script
from polypilot_tui.config import AgentConfig, Settings
from polypilot_tui.domain import eventlog
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.model_choice import ModelChoices, ModelOption
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.tool_servers import ToolServerSource, no_servers
from polypilot_tui.infra.private import open_private, private_dir
from polypilot_tui.infra.redact import REDACTOR

log = logging.getLogger(__name__)

#: Types the Copilot CLI persists (session.idle and deltas never reach its log).
_PERSISTED = frozenset(
    {
        EventType.SESSION_START,
        EventType.SESSION_RESUME,
        EventType.SESSION_SHUTDOWN,
        EventType.SESSION_ERROR,
        EventType.USER_MESSAGE,
        EventType.TURN_START,
        EventType.TURN_END,
        EventType.MESSAGE,
        EventType.TOOL_START,
        EventType.TOOL_COMPLETE,
        EventType.PERMISSION_REQUESTED,
        EventType.PERMISSION_COMPLETED,
        EventType.ABORT,
    }
)

#: The models the demo agent offers (fakes, so the model picker can be tried offline).
DEMO_MODELS = (
    ModelOption("demo-model", "Demo", "the default: replies at the demo speed"),
    ModelOption("demo-fast", "Demo Fast", "a pretend small model"),
    ModelOption("demo-deep", "Demo Deep", "a pretend large model"),
)

#: Faults fire once per agent session, like a real binding loss: after a reconnect it works.
_FAULTS_SEEN: set[tuple[str, str]] = set()


class DemoBackend:
    """A scripted agent session on the manager's clock (virtual time in tests)."""

    kind = "demo"

    def __init__(
        self,
        agent: AgentConfig,
        sink: EventSink,
        clock: Clock,
        settings: Settings,
        workdir: Path,
        tool_servers: ToolServerSource = no_servers,
    ) -> None:
        self._agent = agent
        self._tool_servers = tool_servers
        self._sink = sink
        self.clock = clock
        self._speed = max(0.01, settings.demo_speed)
        self._log_path = workdir / "events.jsonl"
        self._alive = False
        self._session_id = ""
        self._task: asyncio.Task[None] | None = None
        self._open_tools: dict[str, str] = {}
        self._permissions: dict[str, asyncio.Future[str]] = {}
        self._always_allowed = False
        self._log_size = self._log_path.stat().st_size if self._log_path.exists() else 0
        self._last_write = clock.now()
        self._last_type: str | None = None
        self._model = agent.model or DEMO_MODELS[0].id

    # ---- AgentBackend --------------------------------------------------------------
    async def connect(self, resume_id: str | None) -> ConnectResult:
        # Asked like every agent's, but the scripted agent calls no tools: it starts none, and
        # the engine's check of the tools' arrival says so.
        self._tool_servers()
        entries = agent_log.read_tail(self._log_path) if resume_id else []
        self._alive = True
        self._session_id = resume_id or f"demo-{uuid.uuid4().hex[:12]}"
        if resume_id:
            self._write(EventType.SESSION_RESUME, {"eventCount": len(entries)})
            return ConnectResult(
                self._session_id,
                "resumed",
                resumed=True,
                interrupted_tool=eventlog.has_interrupted_tool(entries),
                still_processing=False,
                lost_turn=eventlog.lost_turn(entries),
            )
        self.emit(EventType.SESSION_START, {"sessionId": self._session_id, "selectedModel": self._model})
        return ConnectResult(self._session_id, "new session")

    async def send(self, prompt: str) -> None:
        if not self._alive:
            raise BackendError("the demo agent is not running")
        if self._task is not None and not self._task.done():
            self._task.cancel()
        name = pick_script(prompt, self._agent.script)
        fault_key = (self._session_id, name)
        healthy = name in SCRIPTS.faults and fault_key in _FAULTS_SEEN
        _FAULTS_SEEN.add(fault_key)
        script = SCRIPTS.get("tools" if healthy else name)
        if name == "dead-send" and not healthy:
            return  # accepted, swallowed: nothing is written anywhere (#393)
        self._write(EventType.USER_MESSAGE, {"content": prompt})
        self._task = asyncio.get_running_loop().create_task(self._run(script, prompt))

    async def abort(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for future in list(self._permissions.values()):
            if not future.done():
                future.set_result(CANCELLED)
        for call_id, name in list(self._open_tools.items()):
            self.emit(
                EventType.TOOL_COMPLETE,
                {"toolCallId": call_id, "toolName": name, "success": False, "error": {"message": "aborted"}},
            )
        self._open_tools.clear()
        if self._alive:
            self.emit(EventType.ABORT, {"reason": "user_initiated"})
            self.emit(EventType.SESSION_IDLE, {"aborted": True})

    async def kill(self) -> None:
        await self._halt()
        self.emit(EventType.CONNECTION_LOST, {"reason": "demo agent killed"})

    async def close(self) -> None:
        await self._halt()

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        future = self._permissions.get(request_id)
        if future is None or future.done():
            return
        if option_id == ALLOW_ALWAYS:
            self._always_allowed = True
        future.set_result(option_id)

    def probe(self) -> Probes | None:
        return Probes(
            agent_alive=self._alive,
            log_age=self.clock.now() - self._last_write,
            log_size=self._log_size,
            log_last_type=self._last_type,
        )

    async def models(self) -> ModelChoices:
        """The demo's three fake models (one more when the agent's config names another)."""
        configured = self._agent.model
        known = not configured or any(m.id == configured for m in DEMO_MODELS)
        extra = () if known else (ModelOption(str(configured), "", "configured"),)
        return ModelChoices(self._model, DEMO_MODELS + extra)

    async def set_model(self, model_id: str) -> None:
        """Switch to one of the demo's models (a new agent session starts at the default again)."""
        if not (await self.models()).offers(model_id):
            raise BackendError(f"the demo agent has no model {model_id!r}")
        self._model = model_id

    def diagnostics(self) -> Diagnostics:
        """The demo agent runs in the app; its only log is its events.jsonl."""
        return Diagnostics("built-in demo agent (in process)", (("Event log", str(self._log_path)),))

    # ---- used by scripts -----------------------------------------------------------
    def emit(self, kind: str, data: dict[str, Any]) -> None:
        """Deliver an event (and persist it the way the Copilot CLI would)."""
        if kind in _PERSISTED:
            self._write(kind, data)
        self._sink(AgentEvent(kind, data))

    async def pause(self, seconds: float) -> None:
        await self.clock.sleep(seconds / self._speed)

    def die(self, reason: str) -> None:
        """The agent process "crashes": nothing more is written or said."""
        self._alive = False
        self._open_tools.clear()
        self._sink(AgentEvent(EventType.CONNECTION_LOST, {"reason": reason}))

    async def ask_permission(self, call_id: str, title: str, detail: str) -> str:
        """Ask like an agent does; returns the option id the user (or policy) chose."""
        if self._always_allowed:
            return ALLOW_ALWAYS
        request_id = f"perm-{uuid.uuid4().hex[:8]}"
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._permissions[request_id] = future
        self.emit(
            EventType.PERMISSION_REQUESTED,
            {
                "requestId": request_id,
                "toolCallId": call_id,
                "kind": "shell",
                "title": title,
                "detail": detail,
                "rawInput": {"command": detail},  # what allow-in-sandbox places, as an ACP agent says it
                "options": [
                    {"optionId": ALLOW_ONCE, "name": "Allow once", "kind": "allow_once"},
                    {"optionId": ALLOW_ALWAYS, "name": "Allow always", "kind": "allow_always"},
                    {"optionId": REJECT_ONCE, "name": "Reject", "kind": "reject_once"},
                ],
            },
        )
        try:
            choice = await future
        finally:
            self._permissions.pop(request_id, None)
        self.emit(EventType.PERMISSION_COMPLETED, {"requestId": request_id, "result": {"kind": choice}})
        return choice

    def tool_started(self, call_id: str, name: str) -> None:
        self._open_tools[call_id] = name

    def tool_finished(self, call_id: str) -> None:
        self._open_tools.pop(call_id, None)

    # ---- internals -----------------------------------------------------------------
    async def _run(self, script: Any, prompt: str) -> None:
        try:
            await script(self, prompt)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a task's top: a script's bug is logged in full and ends the turn visibly
            log.exception("demo script failed")
            self.emit(EventType.SESSION_ERROR, {"errorType": "demo", "message": str(exc)})

    async def _halt(self) -> None:
        self._alive = False
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for future in self._permissions.values():
            if not future.done():
                future.set_result(CANCELLED)

    def _write(self, kind: str, data: dict[str, Any]) -> None:
        # The agent's own log lives in our state folder: it is redacted like everything we write.
        entry = {"type": kind, "data": data, "id": uuid.uuid4().hex, "timestamp": self.clock.wall()}
        line = dump_json(REDACTOR.scrub(entry)) + "\n"
        try:
            try:
                fd = open_private(self._log_path)
            except FileNotFoundError:  # its folder first (checked once, not at every line)
                private_dir(self._log_path.parent)
                fd = open_private(self._log_path)
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError as exc:  # the log is a convenience for restore hints, never fatal
            log.warning("demo log write failed: %s", exc)
        self._log_size += len(line.encode())
        self._last_write = self.clock.now()
        self._last_type = kind
