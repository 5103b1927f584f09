"""ACP backend: one Agent Client Protocol agent process per session (opencode, codex-acp…).

Built on ``agent-client-protocol`` 0.12.1 with the traps of ``reference/acp.md`` handled:
stderr is drained into a capped, redacted per-session log (an unread PIPE hangs the agent),
the environment is passed explicitly (the SDK trims it), every raw message is kept in a
JSONL transcript and updates are mapped from that raw stream (the SDK drops what fails its
schema), lines with invalid UTF-8 are decoded with replacement (the SDK drops them),
permission requests for unknown tool ids are accepted, and Stop answers open permission
prompts itself (the SDK ignores ``$/cancel_request``). The agent runs on a leash: its own
process group, which dies with the app however the app ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Awaitable, Mapping, TypeVar

from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import AgentCapabilities, ClientCapabilities, FileSystemCapabilities, Implementation
from pydantic import ValidationError

from polypilot_tui.agents.acp.client import AcpClient, PermissionDesk, Transcript
from polypilot_tui.agents.acp.mapping import UpdateMapper
from polypilot_tui.agents.acp.process import agent_command, agent_environment, start_agent, stop_agent, terminate
from polypilot_tui.agents.acp.transport import StdioTransport
from polypilot_tui.agents.stderr_log import AgentStderr
from polypilot_tui.agents.base import CANCELLED, BackendError, ConnectResult, Diagnostics, EventSink, tail_lines
from polypilot_tui.config import AgentConfig, Settings
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.probes import Probes
from polypilot_tui.infra.private import private_dir
from polypilot_tui.infra.redact import REDACTOR

logger = logging.getLogger(__name__)
T = TypeVar("T")

try:
    _VERSION = importlib.metadata.version("polypilot_tui")
except importlib.metadata.PackageNotFoundError:
    _VERSION = "0"

#: initialize / session/new / load / resume; opencode needs ~3-5 s, a cold CI box more.
CONNECT_TIMEOUT = 90.0
#: close(): after stdin is closed, wait this long for a clean exit before SIGTERM (and again
#: before SIGKILL). codex-acp never exits on EOF, so this is paid on every close.
SHUTDOWN_GRACE = 1.0
STDERR_LOG = "agent-stderr.log"
TRANSCRIPT = "acp-transcript.jsonl"
_NOTED_STOPS = {"max_tokens": "the model hit its output token limit", "refusal": "the agent refused to continue",
                "max_turn_requests": "the agent hit its limit of model requests for one turn"}


def request_error_text(exc: RequestError) -> str:
    """An agent's JSON-RPC error in words: its own message first, the protocol's label after.

    codex sends ``Internal error`` with ``data={"message": "stream disconnected …"}``: the
    data's message is what the user needs to read.
    """
    data = exc.data
    message = data.get("message") if isinstance(data, Mapping) else data if isinstance(data, str) else None
    label = str(exc) or "agent error"
    if isinstance(message, str) and message.strip():
        return f"{message.strip()} ({label})"
    return f"{label} ({data})" if data else label


class _Refused(BackendError):
    """The agent answered a request with a JSON-RPC error (the connection is fine)."""


class AcpBackend:
    """One ACP agent process driving one session (see :class:`AgentBackend`)."""

    kind = "acp"

    def __init__(self, agent: AgentConfig, sink: EventSink, clock: Clock, settings: Settings, workdir: Path,
                 *, cwd: Path | None = None, prefer_load: bool = False) -> None:
        self._agent = agent
        REDACTOR.learn_agents([agent])  # what the agent echoes of its key is redacted wherever it lands
        self._sink = sink
        self._clock = clock
        self._settings = settings
        self._workdir = Path(workdir)
        self._cwd = Path(cwd or agent.cwd or Path.cwd()).expanduser().resolve()
        self._prefer_load = prefer_load
        """Use session/load even when session/resume exists (to get the history back)."""
        self._stack: AsyncExitStack | None = None
        self._conn: ClientSideConnection | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._transcript: Transcript | None = None
        self._stderr: AgentStderr | None = None
        self._session_id: str | None = None
        self.capabilities: AgentCapabilities | None = None
        self._gen = 0
        """Bumped at every spawn and teardown; callbacks of an older process do nothing."""
        self._ready = False
        self._lost_gens: set[int] = set()
        self._kill_gen: int | None = None
        self._prompt_task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._last_inbound: float | None = None
        self._raw_stop: Any = None
        self._prompt_written = asyncio.Event()
        self._retiring: asyncio.Task[None] | None = None
        """A prompt of a turn the engine closed, being cancelled before the next send."""
        self._cancel_sent: asyncio.Task[None] | None = None
        """The prompt task a session/cancel was already sent for."""
        self._mapper = UpdateMapper(self._emit)
        self._replay: UpdateMapper | None = None
        self._desk = PermissionDesk(self._emit, self._permission_tool)

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def pid(self) -> int | None:
        """The agent process id (None before connect)."""
        return self._proc.pid if self._proc is not None else None

    # ------------------------------------------------------------------ contract

    async def connect(self, resume_id: str | None) -> ConnectResult:
        await self._teardown()
        await self._spawn()
        try:
            return await self._open_session(resume_id)
        except BaseException:
            await self._teardown()
            raise

    async def send(self, prompt: str) -> None:
        if not self._ready or self._conn is None or self._session_id is None:
            raise BackendError("the ACP agent is not connected (reconnect the session)")
        stale = self._prompt_task
        if stale is not None and not stale.done():
            # The engine only sends when it has closed the previous turn (its watchdog
            # completed or gave up on it), but the agent is still on that prompt.
            await self._retire(stale)
            if not self._ready or self._conn is None or self._session_id is None:
                raise BackendError("the ACP agent was lost while its previous turn was being cancelled")
        self._mapper.begin_turn()
        self._emit(AgentEvent(EventType.TURN_START, {"turnId": self._session_id}))
        self._prompt_written.clear()
        task = self._prompt_task = asyncio.create_task(self._run_prompt(prompt, self._gen), name="acp-prompt")
        # Return once the request is on the wire, so a Stop right after a send cannot
        # overtake the prompt it is meant to cancel.
        written = asyncio.ensure_future(self._prompt_written.wait())
        try:
            await asyncio.wait({task, written}, timeout=5.0, return_when=asyncio.FIRST_COMPLETED)
        finally:
            written.cancel()

    async def abort(self) -> None:
        task = self._prompt_task
        if not self._ready or self._conn is None or task is None or task.done():
            self._desk.cancel_all()
            return
        if not await self._send_cancel(task):
            return
        self._desk.cancel_all()
        self._mapper.close_open_tools("cancelled", status="cancelled")
        if not await self._wait(task, self._settings.stop_grace_seconds):
            logger.warning("ACP agent did not stop within %.1f s; killing it", self._settings.stop_grace_seconds)
            await self.kill()

    async def _retire(self, task: asyncio.Task[None]) -> None:
        """Cancel a prompt whose turn the engine already closed, reporting nothing of it.

        Its late updates and its end would otherwise land in the next turn (an ``aborted``
        end would even end it). An agent that ignores the cancel is restarted on the same
        session, so the next prompt still goes out.
        """
        self._retiring = task
        try:
            if await self._send_cancel(task):
                self._desk.cancel_all(emit=False)
                if await self._wait(task, self._settings.stop_grace_seconds):
                    return
            if not self._ready:
                return  # the connection died meanwhile (already reported)
            logger.warning("ACP agent ignored session/cancel of a closed turn; restarting it")
            restarted = await self.connect(self._session_id)
            if not restarted.resumed:
                logger.warning("ACP agent restarted without its session: %s", restarted.how)
        finally:
            self._retiring = None

    async def _send_cancel(self, task: asyncio.Task[None]) -> bool:
        """``session/cancel`` once per turn; False when the connection is gone."""
        if self._cancel_sent is task:
            return True
        gen = self._gen
        try:
            assert self._conn is not None
            await self._conn.cancel(session_id=self._session_id)
        except ConnectionError:
            await self._connection_failed(gen)
            return False
        self._cancel_sent = task
        return True

    async def kill(self) -> None:
        proc, gen = self._proc, self._gen
        self._desk.cancel_all()
        if proc is None:
            return
        self._kill_gen = gen
        if proc.returncode is None:
            await terminate(proc)
        self._lost(gen, f"agent process killed (exit code {proc.returncode})")

    async def close(self) -> None:
        try:
            self._desk.cancel_all(emit=False)
            await self._teardown()
        except Exception:  # close never raises
            logger.exception("closing the ACP backend failed")

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        task = self._prompt_task
        if option_id == CANCELLED and task is not None and not task.done():
            # In ACP a "cancelled" outcome belongs to a cancelled turn, and session/cancel
            # must reach the agent first, or it reads a plain rejection and carries on.
            await self._send_cancel(task)
        self._desk.answer(request_id, option_id)

    def probe(self) -> Probes | None:
        proc = self._proc
        alive = (proc is not None and proc.returncode is None and self._ready
                 and self._gen not in self._lost_gens)
        age = None if self._last_inbound is None else max(0.0, self._clock.now() - self._last_inbound)
        return Probes(agent_alive=alive, log_age=age)

    def diagnostics(self) -> Diagnostics:
        """The agent's argv, its stderr log and raw transcript, and the last stderr lines."""
        try:
            command = " ".join(agent_command(self._agent))
        except BackendError as exc:
            command = str(exc)
        path = self._workdir / STDERR_LOG
        tail = self._stderr.recent_lines() if self._stderr is not None else tail_lines(path)
        return Diagnostics(command, (("Agent stderr", str(path)), ("ACP transcript", str(self._workdir / TRANSCRIPT))),
                           tail)

    # ------------------------------------------------------------------ process

    async def _spawn(self) -> None:
        argv = agent_command(self._agent)
        private_dir(self._workdir)
        self._gen += 1
        gen = self._gen
        stack = AsyncExitStack()
        stderr = AgentStderr(self._workdir / STDERR_LOG)
        stack.callback(stderr.close)
        transcript = Transcript(self._workdir / TRANSCRIPT, self._clock)
        stack.callback(transcript.close)
        try:
            proc = await start_agent(argv, agent_environment(self._agent), self._cwd, stderr.write_fd)
        except OSError as exc:
            await stack.aclose()
            raise BackendError(f"cannot start ACP agent {argv[0]!r}: {exc}") from None
        finally:
            stderr.started()
        # Unwound last-in first-out: the connection closes, then the process is stopped.
        stack.push_async_callback(stop_agent, proc, SHUTDOWN_GRACE)
        assert proc.stdout is not None and proc.stdin is not None
        conn = ClientSideConnection(AcpClient(self._cwd, self._desk), StdioTransport(proc.stdout, proc.stdin),
                                    observers=[lambda ev: self._observe(gen, ev)])
        stack.push_async_callback(conn.close)
        self._stack, self._conn, self._proc = stack, conn, proc
        self._transcript, self._stderr = transcript, stderr
        self._last_inbound = self._clock.now()
        self._watch_task = asyncio.create_task(self._watch(proc, gen), name="acp-watch")
        logger.info("ACP agent %s started (pid %s) in %s", argv[0], proc.pid, self._cwd)

    async def _teardown(self) -> None:
        """Stop tasks and the process of the current generation; safe to call twice."""
        self._ready = False
        self._gen += 1
        self._desk.cancel_all(emit=False)
        for task in (self._prompt_task, self._watch_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self._prompt_task = self._watch_task = None
        stack, proc = self._stack, self._proc
        self._stack = self._conn = None
        if stack is not None:
            try:
                # Stdin closed, SHUTDOWN_GRACE for a clean exit, then SIGTERM and SIGKILL.
                await asyncio.wait_for(stack.aclose(), timeout=10.0)
            except Exception:
                logger.exception("ACP agent shutdown failed")
                if proc is not None and proc.returncode is None:
                    await terminate(proc)

    async def _watch(self, proc: asyncio.subprocess.Process, gen: int) -> None:
        """Report the agent's death even when no prompt is running."""
        code = await proc.wait()
        if gen == self._gen and self._ready:
            await self._stderr_drained()
            self._lost(gen, f"agent process exited (exit code {code})")

    def _lost(self, gen: int, reason: str) -> None:
        """Emit connection.lost once per process generation."""
        if gen != self._gen or gen in self._lost_gens:
            return
        self._lost_gens.add(gen)
        self._ready = False
        if self._kill_gen == gen and "killed" not in reason:
            reason = f"agent process killed ({reason})"
        self._desk.cancel_all()
        self._mapper.finish()
        self._emit(AgentEvent(EventType.CONNECTION_LOST, {"reason": reason}))

    async def _connection_failed(self, gen: int) -> None:
        """The JSON-RPC stream closed: wait briefly for the exit code, then report."""
        proc = self._proc
        if proc is not None and gen == self._gen:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=0.5)
        code = proc.returncode if proc is not None else None
        what = "still running" if code is None else f"exit code {code}"
        await self._stderr_drained()
        self._lost(gen, f"connection to the agent closed ({what})")

    async def _stderr_drained(self) -> None:
        """The agent is gone; its last words may still be in the pipe: give the reader a moment
        (polled: a blocking wait would hold a thread of the default executor the SDKs share).
        The manager reads them from :meth:`diagnostics` for the failure it reports."""
        stderr = self._stderr
        for _ in range(25):
            if stderr is None or stderr.done.is_set():
                return
            await asyncio.sleep(0.02)

    # ------------------------------------------------------------------ session

    async def _open_session(self, resume_id: str | None) -> ConnectResult:
        assert self._conn is not None
        conn = self._conn
        init = await self._call(conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False),
            client_info=Implementation(name="polypilot", title="PolyPilot TUI", version=_VERSION),
        ), "initialize")
        caps = init.agent_capabilities or AgentCapabilities()
        self.capabilities = caps
        can_resume = caps.session_capabilities is not None and caps.session_capabilities.resume is not None
        failures: list[str] = []
        if resume_id and can_resume and not (self._prefer_load and caps.load_session):
            try:
                self._session_id = resume_id
                await self._call(conn.resume_session(session_id=resume_id, cwd=str(self._cwd), mcp_servers=[]),
                                 "session/resume")
                return self._opened(ConnectResult(resume_id, "resumed", resumed=True))
            except _Refused as exc:
                failures.append(str(exc))
        if resume_id and caps.load_session:
            try:
                history = await self._load(resume_id)
                return self._opened(ConnectResult(resume_id, "loaded (history replayed)", resumed=True,
                                                  history=history))
            except _Refused as exc:
                failures.append(str(exc))
        self._session_id = None
        created = await self._call(conn.new_session(cwd=str(self._cwd), mcp_servers=[]), "session/new")
        self._session_id = created.session_id
        if not resume_id:
            how = "new session"
        elif failures:
            how = f"new session (resume failed: {'; '.join(failures)})"
        else:
            how = "new session (agent cannot resume)"
        return self._opened(ConnectResult(created.session_id, how))

    def _opened(self, result: ConnectResult) -> ConnectResult:
        self._ready = True
        self._mapper = UpdateMapper(self._emit)
        logger.info("ACP session %s: %s", result.agent_session_id, result.how)
        return result

    async def _load(self, session_id: str) -> tuple[AgentEvent, ...]:
        """``session/load``: the replayed updates become ConnectResult.history."""
        assert self._conn is not None
        events: list[AgentEvent] = []
        self._session_id = session_id
        self._replay = UpdateMapper(events.append, replay=True, prefix="history")
        try:
            await self._call(self._conn.load_session(session_id=session_id, cwd=str(self._cwd), mcp_servers=[]),
                             "session/load")
        finally:
            replay, self._replay = self._replay, None
        replay.finish()
        # The agent process is new: a tool the history leaves open can no longer finish.
        replay.close_open_tools("interrupted (the agent was restarted)")
        return tuple(events)

    async def _call(self, awaitable: Awaitable[T], what: str) -> T:
        """Await a request; failures become BackendErrors that say what went wrong."""
        try:
            return await asyncio.wait_for(awaitable, timeout=CONNECT_TIMEOUT)
        except RequestError as exc:
            raise _Refused(f"{what} failed: {request_error_text(exc)}") from None
        except ConnectionError:
            await self._stderr_drained()
            raise BackendError(f"the agent exited during {what}") from None
        except asyncio.TimeoutError:
            raise BackendError(f"the agent did not answer {what} within {CONNECT_TIMEOUT:.0f} s") from None
        except ValidationError as exc:
            raise BackendError(f"the agent's answer to {what} is not valid ACP: {exc.errors()[:1]}") from None

    # ------------------------------------------------------------------ turns

    async def _run_prompt(self, prompt: str, gen: int) -> None:
        assert self._conn is not None and self._session_id is not None
        self._raw_stop = None
        usage: Any = None
        try:
            response = await self._conn.prompt(session_id=self._session_id, prompt=[text_block(prompt)])
            stop, usage = response.stop_reason, response.usage
        except ValidationError:
            stop = self._raw_stop.get("stopReason") if isinstance(self._raw_stop, Mapping) else None
            if not isinstance(stop, str):
                return self._end_turn(gen, error="the agent's prompt response is not valid ACP")
        except ConnectionError:
            return await self._connection_failed(gen)
        except RequestError as exc:
            return self._end_turn(gen, error=request_error_text(exc))
        except Exception as exc:  # anything else still ends the turn visibly
            logger.exception("ACP prompt failed")
            return self._end_turn(gen, error=f"{type(exc).__name__}: {exc}")
        self._end_turn(gen, stop=stop, usage=usage)

    def _end_turn(self, gen: int, stop: str | None = None, error: str | None = None, usage: Any = None) -> None:
        if gen != self._gen:
            return  # a turn of a process we already replaced
        self._desk.cancel_all()
        self._mapper.finish()
        if stop == "cancelled":
            self._mapper.close_open_tools("cancelled", status="cancelled")
        else:
            self._mapper.close_open_tools("the turn ended before the tool reported a result")
        if usage is not None:
            self._emit(AgentEvent(EventType.ASSISTANT_USAGE, usage.model_dump(mode="json", by_alias=True,
                                                                              exclude_none=True)))
        if error is not None:
            self._emit(AgentEvent(EventType.SESSION_ERROR, {"message": error, "errorType": "acp"}))
            return
        self._emit(AgentEvent(EventType.TURN_END, {"turnId": self._session_id}))
        data: dict[str, Any] = {"stopReason": stop, "aborted": stop == "cancelled"}
        if stop in _NOTED_STOPS:
            data["note"] = _NOTED_STOPS[stop]
            self._emit(AgentEvent(EventType.SYSTEM_MESSAGE, {"content": f"Turn ended: {_NOTED_STOPS[stop]}.",
                                                             "level": "warning"}))
        self._emit(AgentEvent(EventType.SESSION_IDLE, data))

    async def _wait(self, task: asyncio.Task[Any], seconds: float) -> bool:
        """True when ``task`` finished within ``seconds`` of the backend's clock."""
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait({task, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
        return task.done()

    # ------------------------------------------------------------------ raw stream

    def _observe(self, gen: int, event: StreamEvent) -> None:
        """Every message in and out: transcript, liveness, and the update mapping."""
        if gen != self._gen:
            return
        message = event.message
        incoming = event.direction == StreamDirection.INCOMING
        if self._transcript is not None:
            self._transcript.write("in" if incoming else "out", message)
        if not incoming:
            if message.get("method") == "session/prompt":
                self._prompt_written.set()
            return
        method = message.get("method")
        params = message.get("params") if isinstance(message.get("params"), Mapping) else {}
        update = params.get("update") if method == "session/update" else None
        if not (isinstance(update, Mapping) and update.get("sessionUpdate") == "usage_update"):
            self._last_inbound = self._clock.now()  # usage is no sign of life (#230)
        if method == "session/update":
            if not isinstance(update, Mapping):
                return
            if self._session_id is not None and params.get("sessionId") not in (None, self._session_id):
                return
            (self._replay or self._mapper).handle(update)
        elif method is None and isinstance(message.get("result"), Mapping) and "stopReason" in message["result"]:
            self._raw_stop = message["result"]  # fallback when the SDK rejects the response

    def _permission_tool(self, tool_call: Mapping[str, Any]) -> Mapping[str, Any]:
        return self._mapper.note_permission_tool(tool_call)

    def _emit(self, event: AgentEvent) -> None:
        if self._retiring is not None and event.type != EventType.CONNECTION_LOST:
            return  # the rest of a turn the engine has already closed
        try:
            self._sink(event)
        except Exception:  # a broken sink must not break the agent's stream
            logger.exception("event sink failed on %s", event.type)


