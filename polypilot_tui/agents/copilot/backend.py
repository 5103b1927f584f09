"""The Copilot backend: ``github-copilot-sdk`` driving one real Copilot CLI per session.

Each backend owns one ``CopilotClient`` and therefore one CLI process, so Stop/Kill of a
session never touches another. The recipe (see shared/reference/copilot-sdk.md): pass the
CLI path explicitly, pass the environment explicitly (GitHub tokens dropped unless the
agent config sets them), and with a BYOK provider set ``COPILOT_OFFLINE`` +
``COPILOT_PROVIDER_BASE_URL`` + ``COPILOT_MODEL`` in the env AND pass ``provider=`` on
create and on every resume. The event handler is registered before create/resume.

SDK events arrive on the loop that started the client (the SDK's reader thread uses
``call_soon_threadsafe``); process death is noticed by a watcher thread and the JSON-RPC
close hook, both of which hop onto the loop before touching anything.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from polypilot_tui.agents.base import BackendError, ConnectResult, Diagnostics, EventSink
from polypilot_tui.agents.copilot.events import (
    RESULT_KINDS,
    PromptInfo,
    aborted_completion,
    decision_for,
    event_from_dict,
    event_from_sdk,
    is_unknown,
    permission_fields,
)
from polypilot_tui.agents.copilot.runtime import (
    build_env,
    install_hooks,
    is_processing,
    kill_tree,
    provider_dict,
    resume_hints,
    session_home,
    watch_process,
)
from polypilot_tui.agents.leash import leashed
from polypilot_tui.agents.npm_cache import COPILOT_CLI, resolve_command
from polypilot_tui.config import AgentConfig, Settings
from polypilot_tui.agents import agent_log
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.probes import Probes
from polypilot_tui.infra.redact import REDACTOR

log = logging.getLogger(__name__)

START_TIMEOUT = 60.0
RPC_TIMEOUT = 30.0
CLOSE_TIMEOUT = 10.0
DEFAULT_BYOK_MODEL = "gpt-4.1"
#: An abort waits this share of the Stop grace for the CLI's ``session.idle``; the rest of
#: the grace is the manager's, to kill the agent when even that does not come.
ABORT_SETTLE_SHARE = 0.8
LEFTOVER_CHECK_TIMEOUT = 5.0


class CopilotBackend:
    """One Copilot CLI process and one SDK session in it."""

    kind = "copilot"

    def __init__(self, agent: AgentConfig, sink: EventSink, clock: Clock, settings: Settings,
                 workdir: Path) -> None:
        self._agent = agent
        REDACTOR.learn_agents([agent])  # what the CLI prints of its key is redacted in our logs
        self._sink = sink
        self.clock = clock
        self._settings = settings
        self._workdir = workdir
        self._env: dict[str, str] = {}
        self._provider: dict[str, Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._session: Any = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._session_id = ""
        self._open_tools: dict[str, str] = {}
        """toolCallId -> tool name, for tools started live and not completed yet."""
        self._prompts: dict[str, PromptInfo] = {}
        self._shown_prompts: set[str] = set()
        self._completed_prompts: set[str] = set()
        self._lost = False
        self._closing = False
        self._busy = False
        """The CLI is in a turn: a prompt went out and its ``session.idle`` has not come."""
        self._not_busy = asyncio.Event()
        self._not_busy.set()
        self._aborting = 0
        self._muted = 0
        """While > 0, events (of a leftover turn being ended before a send) are not emitted."""
        self._command = ""
        self._last_stderr: tuple[str, ...] = ()
        """The CLI's last stderr lines, kept when the client is released (for details after a crash)."""

    # -- facts ----------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def pid(self) -> int | None:
        """The CLI's process id (for tests and diagnostics)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path | None:
        """``$COPILOT_HOME/session-state/<id>/events.jsonl`` of the attached session."""
        if not self._session_id:
            return None
        return session_home(self._env) / "session-state" / self._session_id / "events.jsonl"

    def probe(self) -> Probes | None:
        """Process liveness plus a stat (and 8 KiB tail) of the CLI's own event log."""
        if self._proc is None:
            return None
        alive = self._proc.poll() is None and not self._lost
        path = self.log_path
        stat = agent_log.stat_log(path, self.clock.wall()) if path is not None else None
        if stat is None:
            return Probes(agent_alive=alive)
        return Probes(agent_alive=alive, log_age=stat.age, log_size=stat.size, log_last_type=stat.last_type)

    def diagnostics(self) -> Diagnostics:
        """The CLI's command, its log folder and event log, and the last lines of its stderr."""
        home = session_home(self._env) if self._env else None
        paths: list[tuple[str, str]] = []
        if home is not None:
            paths.append(("Copilot CLI logs", str(home / "logs")))
        if self.log_path is not None:
            paths.append(("Session event log", str(self.log_path)))
        rpc = getattr(self._client, "_client", None)
        stderr = ""
        try:
            stderr = rpc.get_stderr_output() if rpc is not None else ""
        except Exception:  # noqa: BLE001 - diagnostics never fail
            log.debug("copilot: no stderr output", exc_info=True)
        tail = tuple(line for line in stderr.splitlines() if line.strip())[-20:]
        command = " ".join([self._command or "copilot", *self._agent.args])
        return Diagnostics(command, tuple(paths), tail or self._last_stderr)

    # -- connect --------------------------------------------------------------------------

    async def connect(self, resume_id: str | None) -> ConnectResult:
        """Start the CLI, then create a session or resume ``resume_id`` (handler first)."""
        if self._client is not None:
            raise BackendError("this Copilot backend is already connected")
        cli = resolve_command(self._agent.command, COPILOT_CLI)
        self._command = cli or self._agent.command or ""
        if not cli:
            raise BackendError("Copilot CLI not found: install @github/copilot from npm, put `copilot` on PATH, "
                               "or set `command` for this agent")
        self._loop = asyncio.get_running_loop()
        # The SDK's generated modules take ~1.3 s to import: off the loop, so the first
        # Copilot session does not freeze the dashboard.
        await asyncio.to_thread(importlib.import_module, "copilot")
        self._env = build_env(self._agent, os.environ)
        self._provider = provider_dict(self._agent, os.environ)
        if self._provider is not None:
            self._env.setdefault("COPILOT_MODEL", self._model() or DEFAULT_BYOK_MODEL)
        try:
            await asyncio.wait_for(self._start_client(cli), START_TIMEOUT)
            if resume_id:
                return await self._resume(resume_id)
            return await self._create("new session")
        except (BackendError, asyncio.CancelledError):
            await self._abandon()
            raise
        except asyncio.TimeoutError:
            await self._abandon()
            raise BackendError(f"the Copilot CLI did not answer within {START_TIMEOUT:.0f} s") from None
        except Exception as exc:  # noqa: BLE001 - every SDK failure becomes a readable message
            log.warning("copilot: connect failed: %s", exc, exc_info=True)
            await self._abandon()
            raise BackendError(f"Copilot CLI failed to start: {exc}") from exc

    def _model(self) -> str | None:
        return self._agent.model or self._env.get("COPILOT_MODEL") or None

    async def _start_client(self, cli: str) -> None:
        from copilot import CopilotClient, RuntimeConnection

        found = shutil.which(cli, path=self._env.get("PATH")) if os.sep not in cli else cli
        if found is None or not os.access(found, os.X_OK):
            raise BackendError(f"Copilot CLI not found at {cli}")
        # On a leash (agents/leash.py): the CLI and its tools form one process group that
        # dies with the app, however the app ends. The SDK appends its own flags after these.
        argv = leashed(["node", found] if found.endswith(".js") else [found])
        cwd = str(self._agent.cwd or Path.cwd())
        self._client = CopilotClient(
            connection=RuntimeConnection.for_stdio(path=argv[0], args=(*argv[1:], *self._agent.args)),
            env=self._env, working_directory=cwd, use_logged_in_user=False,
        )
        await self._client.start()
        self._proc = getattr(self._client, "_cli_process", None)
        assert self._loop is not None
        install_hooks(self._client, self._loop, on_raw_event=self._on_raw_event, on_closed=self._on_transport_closed)
        if self._proc is not None:
            watch_process(self._proc, self._loop, lambda code: self._mark_lost(f"Copilot CLI exited (code {code})"))
        log.info("copilot: CLI %s started (pid %s)", cli, self.pid)

    def _session_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "on_event": self._on_sdk_event, "on_permission_request": self._on_permission_request,
            "streaming": True, "working_directory": str(self._agent.cwd or Path.cwd()),
        }
        if self._provider is not None:
            kwargs["provider"] = self._provider
        model = self._model()
        if model:
            kwargs["model"] = model
        return kwargs

    async def _create(self, how: str) -> ConnectResult:
        session = await asyncio.wait_for(self._client.create_session(**self._session_kwargs()), START_TIMEOUT)
        self._adopt(session)
        return ConnectResult(agent_session_id=self._session_id, how=how)

    async def _resume(self, resume_id: str) -> ConnectResult:
        from copilot._jsonrpc import JsonRpcError

        path = session_home(self._env) / "session-state" / resume_id / "events.jsonl"
        entries = agent_log.read_tail(path)  # before the resume appends to it
        stat = agent_log.stat_log(path, self.clock.wall())
        try:
            session = await asyncio.wait_for(
                self._client.resume_session(resume_id, continue_pending_work=True, **self._session_kwargs()),
                START_TIMEOUT)
        except JsonRpcError as exc:
            log.warning("copilot: resume of %s refused: %s", resume_id, exc)
            reason = str(exc).rsplit("message: ", 1)[-1]  # drop the JSON-RPC preamble
            return await self._create(f"new session (resume failed: {reason})")
        self._adopt(session)
        pending = await self._surface_pending_permissions()
        processing = await is_processing(session)
        if processing:
            self._set_busy(True)
        hints = resume_hints(entries, stat.age if stat else None, pending, processing)
        how = "resumed"
        if hints.interrupted_tool:
            # #393: a tool that died with the old CLI must be cut off before the next send.
            log.info("copilot: %s ended inside a tool; aborting it after resume", resume_id)
            try:
                await self.abort()
                how = "resumed (interrupted tool aborted)"
            except BackendError as exc:  # the manager aborts again before the next send
                log.warning("copilot: abort after resume failed: %s", exc)
        return ConnectResult(agent_session_id=self._session_id, how=how, resumed=True,
                             interrupted_tool=hints.interrupted_tool, still_processing=hints.still_processing,
                             lost_turn=hints.lost_turn)

    def _adopt(self, session: Any) -> None:
        self._session = session
        self._session_id = str(session.session_id)
        log.info("copilot: attached to session %s", self._session_id)

    async def _surface_pending_permissions(self) -> set[str]:
        """Re-emit requests still waiting for an answer; returns their tool call ids."""
        try:
            result = await asyncio.wait_for(self._session.rpc.permissions.pending_requests(), RPC_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - an old CLI without the RPC is not fatal
            log.warning("copilot: cannot list pending permissions: %s", exc)
            return set()
        tool_ids: set[str] = set()
        for item in getattr(result, "items", []) or []:
            try:
                raw = item.to_dict()
            except Exception:  # noqa: BLE001
                log.debug("copilot: unreadable pending permission", exc_info=True)
                continue
            self._handle_event(AgentEvent(EventType.PERMISSION_REQUESTED, raw))
            info = self._prompts.get(str(raw.get("requestId", "")))
            if info is not None and info.tool_call_id:
                tool_ids.add(info.tool_call_id)
        return tool_ids

    # -- turn control ---------------------------------------------------------------------

    def _require_session(self) -> Any:
        if self._session is None:
            raise BackendError("not connected to a Copilot session")
        if self._lost:
            raise BackendError("the Copilot CLI is gone; reconnect the session")
        return self._session

    async def send(self, prompt: str) -> None:
        """Hand a prompt to the CLI; events follow through the sink.

        The manager sends only when it holds no turn, but the CLI may still be in one: a
        Stop whose abort is still settling, or a turn the watchdog completed while the CLI
        was in fact still waiting on the model. That leftover turn is ended first (abort),
        with its events muted, so its ``session.idle {aborted}`` cannot end this turn and
        the CLI does not run this prompt behind a hung model call.
        """
        session = self._require_session()
        if self._aborting or self._busy:
            await self._end_leftover_turn(session)
        self._set_busy(True)
        await self._call(session.send(prompt), "send")

    async def _end_leftover_turn(self, session: Any) -> None:
        self._muted += 1
        try:
            seconds = self._abort_settle_seconds()
            if not self._aborting:
                if await is_processing(session, timeout=LEFTOVER_CHECK_TIMEOUT) is False:
                    self._set_busy(False)  # the idle of the last turn never came; nothing runs
                    return
                log.info("copilot: %s is still in an earlier turn; aborting it before the next prompt",
                         self._session_id)
                await self._call(session.abort(), "abort")
                self._close_open_tools()
            if not await self._settle(seconds):
                log.warning("copilot: the earlier turn of %s did not end within %.1f s; sending anyway",
                            self._session_id, seconds)
        finally:
            self._muted -= 1

    async def abort(self) -> None:
        """``session.abort``, then wait until the CLI has ended the turn (``session.idle``).

        The CLI answers the abort RPC at once and sends ``session.idle {aborted}`` a little
        later. Returning before that idle would let the next prompt's turn be ended by it
        (found by tests/e2e/test_copilot_manager.py: Stop, then send at once). Raises
        BackendError when the turn does not end within most of the Stop grace, so the
        manager kills the agent, as it does when the abort itself hangs.
        """
        session = self._require_session()
        self._aborting += 1
        try:
            await self._call(session.abort(), "abort")
            self._close_open_tools()
            seconds = self._abort_settle_seconds()
            if not await self._settle(seconds) and not self._lost:
                if await is_processing(session, timeout=1.0) is not False:
                    raise BackendError(f"the Copilot CLI did not end the turn within {seconds:.1f} s of the abort")
                self._set_busy(False)  # it is idle; the echo just never came
        finally:
            self._aborting -= 1

    def _abort_settle_seconds(self) -> float:
        return max(0.5, self._settings.stop_grace_seconds * ABORT_SETTLE_SHARE)

    async def _settle(self, seconds: float) -> bool:
        """Wait until the CLI is out of its turn (or gone); False on timeout."""
        try:
            await asyncio.wait_for(self._not_busy.wait(), seconds)
        except asyncio.TimeoutError:
            return False
        return True

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        (self._not_busy.clear if busy else self._not_busy.set)()

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        """Answer a pending request (also one that survived a restart) by option id."""
        from copilot.generated.rpc import PermissionDecisionRequest

        session = self._require_session()
        info = self._prompts.get(request_id)
        try:
            decision = decision_for(option_id, info)
        except ValueError as exc:
            raise BackendError(str(exc)) from None
        request = PermissionDecisionRequest(request_id=request_id, result=decision)
        result = await self._call(session.rpc.permissions.handle_pending_permission_request(request), "permission")
        self._prompts.pop(request_id, None)
        self._handle_event(AgentEvent(EventType.PERMISSION_COMPLETED, {
            "requestId": request_id, "toolCallId": info.tool_call_id if info else "",
            "result": {"kind": RESULT_KINDS.get(option_id, option_id)}}))
        if getattr(result, "success", True) is False:
            raise BackendError("the agent was no longer waiting for that permission request")

    async def _call(self, awaitable: Any, what: str) -> Any:
        """Await an SDK call with a timeout; CLI death becomes connection.lost + BackendError."""
        from copilot._jsonrpc import JsonRpcError, ProcessExitedError

        try:
            return await asyncio.wait_for(awaitable, RPC_TIMEOUT)
        except ProcessExitedError as exc:
            self._mark_lost(f"Copilot CLI exited: {exc}")
            raise BackendError(f"{what} failed: the Copilot CLI exited") from None
        except (JsonRpcError, asyncio.TimeoutError, OSError, RuntimeError) as exc:
            log.warning("copilot: %s failed: %r", what, exc)
            raise BackendError(f"{what} failed: {exc or type(exc).__name__}") from None

    def _close_open_tools(self) -> None:
        """Synthetic failed completions for tools an abort cut off (the CLI sends none)."""
        tools, self._open_tools = self._open_tools, {}
        for call_id, name in tools.items():
            self._emit(aborted_completion(call_id, name))

    # -- stopping -------------------------------------------------------------------------

    async def kill(self) -> None:
        """SIGKILL the CLI and its children, report connection.lost, release the client."""
        if self._client is None and self._proc is None:
            return  # never started: nothing to kill, nothing was lost
        if self._proc is not None:
            kill_tree(self._proc)
        self._mark_lost("killed")
        await self._release(graceful=False)

    async def close(self) -> None:
        """Detach the session and stop the CLI; never raises."""
        self._closing = True
        try:
            if self._session is not None and not self._lost:
                await asyncio.wait_for(self._session.disconnect(), CLOSE_TIMEOUT / 2)
        except Exception as exc:  # noqa: BLE001 - close never raises
            log.debug("copilot: detach failed: %r", exc)
        await self._release(graceful=not self._lost)

    async def _release(self, graceful: bool) -> None:
        self._last_stderr = self.diagnostics().stderr_tail
        client, self._client = self._client, None
        self._session = None
        if client is None:
            return
        self._closing = True
        try:
            if graceful:
                await asyncio.wait_for(client.stop(), CLOSE_TIMEOUT)
                return
        except Exception as exc:  # noqa: BLE001
            log.debug("copilot: graceful stop failed: %r", exc)
        try:
            await asyncio.wait_for(client.force_stop(), CLOSE_TIMEOUT)
        except Exception as exc:  # noqa: BLE001
            log.warning("copilot: force stop failed: %r", exc)

    async def _abandon(self) -> None:
        """Connect failed or was cancelled half way: stop whatever was started, quietly."""
        self._closing = True
        proc = self._proc or getattr(self._client, "_cli_process", None)
        if proc is not None:
            kill_tree(proc)  # synchronous first: a second cancellation must not leak the CLI
        await self._release(graceful=False)

    # -- events (all on the loop) ---------------------------------------------------------

    def _on_sdk_event(self, event: Any) -> None:
        """SDK ``on_event`` handler: runs on the loop; nothing may escape into the SDK."""
        try:
            if is_unknown(event):
                log.debug("copilot: passing through unknown event type %s", getattr(event, "raw_type", "?"))
            self._handle_event(event_from_sdk(event))
        except Exception:  # noqa: BLE001
            log.exception("copilot: event handling failed")

    def _on_raw_event(self, session_id: str, raw: dict[str, Any]) -> None:
        """An event the SDK could not parse (seen on resume): deliver it from the raw dict."""
        if self._session_id and session_id and session_id != self._session_id:
            return
        try:
            self._handle_event(event_from_dict(raw))
        except Exception:  # noqa: BLE001
            log.exception("copilot: raw event handling failed")

    def _handle_event(self, event: AgentEvent) -> None:
        kind = event.type
        if kind == EventType.PERMISSION_REQUESTED:
            data, info = permission_fields(event.data)
            if info is not None:
                if info.request_id in self._shown_prompts or info.request_id in self._completed_prompts:
                    return
                self._shown_prompts.add(info.request_id)
                self._prompts[info.request_id] = info
            event = AgentEvent(kind, data)
        elif kind == EventType.PERMISSION_COMPLETED:
            request_id = event.text("requestId")
            if request_id in self._completed_prompts:
                return  # ours went out first; the CLI's echo adds nothing
            self._completed_prompts.add(request_id)
            self._prompts.pop(request_id, None)
        elif kind == EventType.TOOL_START:
            self._open_tools[event.text("toolCallId")] = event.text("toolName")
        elif kind == EventType.TOOL_COMPLETE:
            self._open_tools.pop(event.text("toolCallId"), None)
        elif kind == EventType.SESSION_IDLE:
            self._set_busy(False)
        elif kind in (EventType.USER_MESSAGE, EventType.TURN_START):
            self._set_busy(True)
        self._emit(event)
        if kind == EventType.ABORT:
            self._close_open_tools()

    def _emit(self, event: AgentEvent) -> None:
        if self._muted and event.type != EventType.CONNECTION_LOST:
            log.debug("copilot: muted %s of an earlier turn", event.type)
            return
        try:
            self._sink(event)
        except Exception:  # noqa: BLE001 - a broken sink must not kill the SDK's callbacks
            log.exception("copilot: event sink failed on %s", event.type)

    def _on_permission_request(self, request: Any, invocation: Any) -> Any:
        """Leave every request pending: the event already reached the sink with its options."""
        from copilot import PermissionNoResult

        return PermissionNoResult()

    # -- death ----------------------------------------------------------------------------

    def _on_transport_closed(self) -> None:
        self._mark_lost("Copilot CLI connection closed")

    def _mark_lost(self, reason: str) -> None:
        """Emit connection.lost once, unless we are closing on purpose."""
        if self._lost or self._closing:
            return
        self._lost = True
        log.warning("copilot: session %s lost its CLI: %s", self._session_id or "?", reason)
        self._open_tools.clear()
        self._set_busy(False)  # nothing will end the turn now; waiters must not wait for it
        self._emit(AgentEvent(EventType.CONNECTION_LOST, {"reason": reason}))
