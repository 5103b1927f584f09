"""The ACP agent process, its JSON-RPC connection and its logs, one generation at a time.

Every spawn and every teardown starts a new *generation*; callbacks of an older process
(its observer, its exit watcher, a prompt it was running) compare generations and do
nothing, so a restarted agent is never blamed for what the old one did. stderr is drained
into a capped, redacted per-session log (an unread PIPE hangs the agent) and every raw
message is kept in a JSONL transcript. The agent runs on a leash: its own process group,
which dies with the app however the app ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.interfaces import Client
from pydantic import ValidationError

from polypilot_tui.agents.acp.client import Transcript
from polypilot_tui.agents.acp.process import agent_command, agent_environment, start_agent, stop_agent, terminate
from polypilot_tui.agents.acp.transport import StdioTransport
from polypilot_tui.agents.base import BackendError, Diagnostics, tail_lines
from polypilot_tui.agents.sandbox import SandboxPlan
from polypilot_tui.agents.stderr_log import AgentStderr
from polypilot_tui.config import AgentConfig
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.exit_status import exit_text
from polypilot_tui.infra.private import private_dir

logger = logging.getLogger(__name__)

#: close(): after stdin is closed, wait this long for a clean exit before SIGTERM (and again
#: before SIGKILL). codex-acp never exits on EOF, so this is paid on every close.
SHUTDOWN_GRACE = 1.0
STDERR_LOG = "agent-stderr.log"
TRANSCRIPT = "acp-transcript.jsonl"

#: Called with every raw message of the current generation: (message, incoming).
MessageObserver = Callable[[Mapping[str, Any], bool], None]

#: How the ACP SDK logs a notification its schema rejects (on the root logger, with a traceback).
_SDK_REJECTION = "Unhandled error while handling notification method=%s"


class SchemaRejections(logging.Filter):
    """The ACP SDK logs a traceback for each ``session/update`` its schema rejects
    (claude-agent-acp's ``usage_update`` with ``"used": null``: one per turn in engine.log).
    Those updates are mapped from the raw message, field by field (agents/acp/mapping.py), so
    the rejection is no failure: it becomes one debug line, without the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if record.msg != _SDK_REJECTION or record.args != ("session/update",) or not isinstance(exc, ValidationError):
            return True
        where = "; ".join(".".join(str(part) for part in error["loc"]) for error in exc.errors()[:3])
        logger.debug("the ACP SDK's schema refused a session/update (mapped from the raw message): %s", where)
        return False


SCHEMA_REJECTIONS = SchemaRejections()


class AgentLink:
    """One ACP agent process at a time, the connection to it, and the news of its death."""

    def __init__(
        self,
        agent: AgentConfig,
        client: Client,
        clock: Clock,
        workdir: Path,
        cwd: Path,
        *,
        on_message: MessageObserver,
        on_lost: Callable[[str], None],
        sandbox: SandboxPlan | None = None,
    ) -> None:
        self._agent = agent
        self._client = client
        self._clock = clock
        self._workdir = workdir
        self._cwd = cwd
        self._on_message = on_message
        self._on_lost = on_lost
        self._sandbox = sandbox
        self.session_id: str | None = None
        """The session on this connection; set before the request that opens it, so its
        updates are taken already while the request runs."""
        self._stack: AsyncExitStack | None = None
        self._conn: ClientSideConnection | None = None
        self._transport: StdioTransport | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._transcript: Transcript | None = None
        self._stderr: AgentStderr | None = None
        self._gen = 0
        """Bumped at every spawn and teardown; callbacks of an older process do nothing."""
        self._ready = False
        self._lost_gens: set[int] = set()
        self._kill_gen: int | None = None
        self._watch_task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ facts

    @property
    def gen(self) -> int:
        """The current process generation."""
        return self._gen

    @property
    def ready(self) -> bool:
        """A session is open on a live connection (False again once it is lost or torn down)."""
        return self._ready

    @property
    def conn(self) -> ClientSideConnection | None:
        """The JSON-RPC connection of the current process (None before spawn and after teardown)."""
        return self._conn

    @property
    def proc(self) -> asyncio.subprocess.Process | None:
        """The last agent process started (None before the first spawn)."""
        return self._proc

    @property
    def alive(self) -> bool:
        """The process runs and its session is open and not lost."""
        proc = self._proc
        return proc is not None and proc.returncode is None and self._ready and self._gen not in self._lost_gens

    def stray_stdout(self) -> tuple[str, ...]:
        """The last lines the current process wrote on stdout that were not JSON-RPC."""
        return tuple(self._transport.stray) if self._transport is not None else ()

    async def exit_code(self) -> int | None:
        """The process's exit code, waiting briefly for it (None while it runs)."""
        proc = self._proc
        if proc is None:
            return None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=0.5)
        return proc.returncode

    def mark_ready(self) -> None:
        """The session is open: prompts may go out."""
        self._ready = True

    def diagnostics(self) -> Diagnostics:
        """The agent's argv, its stderr log and raw transcript, and the last stderr lines."""
        try:
            command = " ".join(agent_command(self._agent))
        except BackendError as exc:
            command = str(exc)
        path = self._workdir / STDERR_LOG
        tail = self._stderr.recent_lines() if self._stderr is not None else tail_lines(path)
        tail = (*tail, *(f"(on stdout, not ACP) {line}" for line in self.stray_stdout()))
        return Diagnostics(
            command, (("Agent stderr", str(path)), ("ACP transcript", str(self._workdir / TRANSCRIPT))), tail
        )

    # ------------------------------------------------------------------ start and stop

    async def spawn(self) -> None:
        """Start a new generation: the process, its stderr log, transcript and connection."""
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
            proc = await start_agent(argv, agent_environment(self._agent), self._cwd, stderr.write_fd, self._sandbox)
        except BackendError:  # its sandbox cannot start: it says why
            await stack.aclose()
            raise
        except OSError as exc:
            await stack.aclose()
            raise BackendError(f"cannot start ACP agent {argv[0]!r}: {exc}") from None
        finally:
            stderr.started()
        # Unwound last-in first-out: the connection closes, then the process is stopped.
        stack.push_async_callback(stop_agent, proc, SHUTDOWN_GRACE)
        assert proc.stdout is not None and proc.stdin is not None
        transport = StdioTransport(proc.stdout, proc.stdin)
        logging.getLogger().addFilter(SCHEMA_REJECTIONS)  # once: a filter is added only once
        conn = ClientSideConnection(self._client, transport, observers=[lambda ev: self._observe(gen, ev)])
        stack.push_async_callback(conn.close)
        self._stack, self._conn, self._proc, self._transport = stack, conn, proc, transport
        self._transcript, self._stderr = transcript, stderr
        self._watch_task = asyncio.create_task(self._watch(proc, gen), name="acp-watch")
        logger.info("ACP agent %s started (pid %s) in %s", argv[0], proc.pid, self._cwd)

    def invalidate(self) -> None:
        """First step of a teardown: from now on, callbacks of the current process do nothing."""
        self._ready = False
        self._gen += 1

    async def shut_down(self) -> None:
        """Last step of a teardown: stop the watcher, close the connection, stop the process."""
        task = self._watch_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._watch_task = None
        stack, proc = self._stack, self._proc
        self._stack = self._conn = None
        if stack is not None:
            try:
                # Stdin closed, SHUTDOWN_GRACE for a clean exit, then SIGTERM and SIGKILL.
                await asyncio.wait_for(stack.aclose(), timeout=10.0)
            except (OSError, TimeoutError) as exc:  # a pipe or log file that would not close, or a hang
                logger.warning("ACP agent shutdown failed: %r", exc)
            finally:  # however the closing ended (a bug in it included), the process does not outlive it
                if proc is not None and proc.returncode is None:
                    await terminate(proc)

    async def kill(self) -> None:
        """Kill the process (and its group) and report the loss."""
        proc, gen = self._proc, self._gen
        if proc is None:
            return
        self._kill_gen = gen
        if proc.returncode is None:
            await terminate(proc)
        how = exit_text(proc.returncode)
        self.lost(gen, f"agent process {how}" if how.startswith("killed") else f"agent process killed ({how})")

    # ------------------------------------------------------------------ death

    def lost(self, gen: int, reason: str) -> None:
        """Report the loss of generation ``gen`` once (nothing if it was already replaced)."""
        if gen != self._gen or gen in self._lost_gens:
            return
        self._lost_gens.add(gen)
        self._ready = False
        if self._kill_gen == gen and "killed" not in reason:
            reason = f"agent process killed ({reason})"
        self._on_lost(reason)

    async def connection_failed(self, gen: int) -> None:
        """The JSON-RPC stream closed: wait briefly for the exit code, then report."""
        proc = self._proc
        if proc is not None and gen == self._gen:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), timeout=0.5)
        code = proc.returncode if proc is not None else None
        what = "still running" if code is None else exit_text(code)
        await self.stderr_drained()
        self.lost(gen, f"connection to the agent closed ({what})")

    async def stderr_caught_up(self) -> None:
        """The agent is alive and just reported an error: its stderr about it may still be in
        the pipe. Wait (briefly, polled) until the log has read everything written so far."""
        stderr = self._stderr
        quiet = 0
        for _ in range(30):
            if stderr is None or stderr.unread() == 0:
                quiet += 1
                if quiet == 2:  # twice in a row: not just between a read and its write
                    return
            else:
                quiet = 0
            await asyncio.sleep(0.01)

    async def stderr_drained(self) -> None:
        """The agent is gone; its last words may still be in the pipe: give the reader a moment
        (polled: a blocking wait would hold a thread of the default executor the SDKs share).
        The manager reads them from :meth:`diagnostics` for the failure it reports."""
        stderr = self._stderr
        for _ in range(25):
            if stderr is None or stderr.done.is_set():
                return
            await asyncio.sleep(0.02)

    async def _watch(self, proc: asyncio.subprocess.Process, gen: int) -> None:
        """Report the agent's death even when no prompt is running."""
        code = await proc.wait()
        if gen == self._gen and self._ready:
            await self.stderr_drained()
            self.lost(gen, f"agent process exited ({exit_text(code)})")

    def _observe(self, gen: int, event: StreamEvent) -> None:
        """Every message in and out of the current generation: transcript, then the observer."""
        if gen != self._gen:
            return
        incoming = event.direction == StreamDirection.INCOMING
        if self._transcript is not None:
            self._transcript.write("in" if incoming else "out", event.message)
        self._on_message(event.message, incoming)
