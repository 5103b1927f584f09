"""The team relay: a stdio MCP server an agent starts, whose tools are the engine's team verbs.

Run as ``python -m polypilot_tui.service.mcp_relay --socket PATH [--log PATH]`` by the agent the
engine handed it to (domain/tool_servers.py ``relay_server``). Each tool asks one team verb
through the project's one service client, with the capability from ``POLYPILOT_TEAM_CAPABILITY``
(it names the orchestration and the session: a worker's relay cannot act as its orchestrator).
An engine's refusal becomes the tool's error, in the engine's words. When the agent lists the
tools, the relay tells the engine they arrived (``TEAM_HELLO``); the engine says so in the
session when that does not happen.

stdout is the MCP wire and stderr the agent's: nothing of ours goes there. Logs go to the
private ``--log`` file (redacted, the capability included), and file descriptor 2 to the null
device, so a library's stray line is no agent's problem. What it sends is bounded as the engine
bounds it (refused, never cut); what it returns too (a long reply is read in pages).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from polypilot_tui.domain.limits import ID_CHARS, NAME_CHARS, PROMPT_BYTES
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.team import WaitUntil, reached
from polypilot_tui.domain.tool_servers import CAPABILITY_ENV, RELAY_NAME
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.verbs import (
    MAX_WAIT_SECONDS,
    TEAM_HELLO,
    TEAM_READ,
    TEAM_SEND,
    TEAM_START,
    TEAM_STOP,
    TEAM_WAIT,
    TEAM_WORKERS,
    StartWorker,
    TeamCall,
    WaitWorkers,
    WorkerPrompt,
    WorkerRef,
    WorkerState,
)
from polypilot_tui.infra.logs import setup_file_logging
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.service.client import EngineClient, EngineUnreachable

log = logging.getLogger(__name__)

T = TypeVar("T")

REPLY_PAGE_CHARS = 50_000
"""Characters of a worker's reply one ``read_reply`` returns; the rest is read from ``start``."""
WAIT_SLICE_SECONDS = 50.0
"""The longest one ``wait_workers`` call waits: agents give up on a tool call after a minute
(opencode: "MCP error -32001: Request timed out" at 60 s), so a longer wait is several calls."""
MAX_WAIT_WORKERS = 200
"""Workers one ``wait_workers`` names at most."""
MAX_LISTED = 200
"""Worker states one answer lists (a bigger team's are counted)."""
HELLO_TIMEOUT = 5.0
"""Seconds the hello may take before the tool list goes out without it (the engine then says
the tools did not arrive, which is what it can know)."""
CALL_SLACK = 60.0
"""Seconds a call may take beyond the longest wait (the engine answers a wait at its timeout)."""
WAIT_DESCRIPTION = (
    "Wait until workers are done, blocked, or any of them is, or the timeout passes. Done is the end of "
    "the worker's turn as polypilot saw it (completed, failed, stopped, stuck): no marker text is needed. "
    f"One call waits at most {WAIT_SLICE_SECONDS:g} s: to wait longer, call it again. Returns their states."
)
INSTRUCTIONS = (
    "polypilot's team tools: start workers (other coding agents, each a session the user sees), "
    "give them prompts, wait until they are done, read their replies, and stop them. Waiting uses "
    "the engine's own end of each worker's turn: no marker text is needed."
)


class TeamTools:
    """The tools' work: each asks one team verb with this relay's capability."""

    def __init__(
        self,
        client: EngineClient,
        capability: str,
        wait_slice: float = WAIT_SLICE_SECONDS,
        hello_timeout: float = HELLO_TIMEOUT,
    ) -> None:
        self._client = client
        self._capability = capability
        self._wait_slice = wait_slice
        self._hello_timeout = hello_timeout
        self.hello_said = False

    async def hello(self) -> None:
        """Tell the engine the agent listed the tools (once; a failure is logged, never raised).
        An engine slow to answer holds the tool list :data:`HELLO_TIMEOUT` at most (an agent
        gives up on it after about a minute, and the relay's calls may wait longer)."""
        if self.hello_said or not self._capability:
            return
        try:
            async with asyncio.timeout(self._hello_timeout):
                await self._client.call(TEAM_HELLO, TeamCall(self._capability))
            self.hello_said = True
            log.info("relay: the engine knows the tools arrived")
        except TimeoutError:
            log.warning(
                "relay: the hello had no answer within %g s: the tools are listed without it", self._hello_timeout
            )
        except (EngineError, OSError) as exc:
            log.warning("relay: the hello was not taken: %s", exc)

    async def list_workers(self) -> str:
        states = await self._ask(self._client.call(TEAM_WORKERS, TeamCall(self._cap())))
        return states_text(states) if states else "You have no workers yet."

    async def start_worker(self, agent: str, prompt: str, name: str, worktree: bool) -> str:
        _bounded("agent", agent, ID_CHARS)
        _bounded("name", name, NAME_CHARS)
        _prompt(prompt)
        request = StartWorker(self._cap(), agent, prompt, name, worktree)
        return _state_text(await self._ask(self._client.call(TEAM_START, request)))

    async def send_worker(self, worker: str, prompt: str) -> str:
        _bounded("worker", worker, ID_CHARS)
        _prompt(prompt)
        return _state_text(await self._ask(self._client.call(TEAM_SEND, WorkerPrompt(self._cap(), worker, prompt))))

    async def wait_workers(self, workers: Sequence[str], until: WaitUntil, timeout_seconds: float) -> str:
        if len(workers) > MAX_WAIT_WORKERS:
            raise ToolError(f"{len(workers)} workers named; at most {MAX_WAIT_WORKERS} in one wait")
        for worker in workers:
            _bounded("worker", worker, ID_CHARS)
        if not 0 < timeout_seconds <= MAX_WAIT_SECONDS:
            raise ToolError(f"timeout_seconds must be above 0 and at most {MAX_WAIT_SECONDS:g}")
        wait = min(timeout_seconds, self._wait_slice)
        request = WaitWorkers(self._cap(), tuple(workers), until, wait)
        states = await self._ask(self._client.call(TEAM_WAIT, request))
        if not states:
            return "You have no workers to wait for."
        text = states_text(states)
        if wait < timeout_seconds and not reached(states, until):
            text += (
                f"\nThis wait returned after {wait:g} s, the longest one call waits (agents give up on longer "
                "tool calls): call wait_workers again to wait longer for those not done."
            )
        return text

    async def read_reply(self, worker: str, start: int) -> str:
        _bounded("worker", worker, ID_CHARS)
        if start < 0:
            raise ToolError("start must be 0 or more")
        reply = await self._ask(self._client.call(TEAM_READ, WorkerRef(self._cap(), worker)))
        text = reply.text
        end = min(len(text), start + REPLY_PAGE_CHARS)
        how = f"its last turn: {reply.outcome or 'not ended'}" + (f" ({reply.reason})" if reply.reason else "")
        if start == 0 and end == len(text):
            return (
                f"Worker {reply.worker}, {how}. Its last reply:\n{text}"
                if text
                else f"Worker {reply.worker}, {how}. It has not replied."
            )
        if start >= len(text) and text:
            raise ToolError(f"start {start} is past the end of the reply ({len(text)} characters)")
        more = f" Call read_reply with start={end} for the rest." if end < len(text) else ""
        return (
            f"Worker {reply.worker}, {how}. Characters {start}-{end} of its last reply's {len(text)}.{more}\n"
            + text[start:end]
        )

    async def stop_worker(self, worker: str) -> str:
        _bounded("worker", worker, ID_CHARS)
        return _state_text(await self._ask(self._client.call(TEAM_STOP, WorkerRef(self._cap(), worker))))

    def _cap(self) -> str:
        if not self._capability:
            raise ToolError(
                f"this tool server was started without its capability ({CAPABILITY_ENV}): polypilot did not "
                "hand it to this agent, so it cannot act for any session"
            )
        return self._capability

    async def _ask(self, call: Awaitable[T]) -> T:
        """The engine's answer; its refusal, in its own words, as the tool's error."""
        try:
            return await call
        except EngineUnreachable as exc:
            raise ToolError(f"the polypilot engine does not answer: {exc}") from None
        except EngineError as exc:
            raise ToolError(str(exc)) from None


def _bounded(what: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise ToolError(f"{what} is {len(value)} characters; at most {limit} (nothing was sent)")


def _prompt(prompt: str) -> None:
    size = len(prompt.encode("utf-8", "surrogatepass"))
    if size > PROMPT_BYTES:
        raise ToolError(f"the prompt is {size:,} bytes; at most {PROMPT_BYTES:,} (nothing was sent)")
    if not prompt.strip():
        raise ToolError("the prompt is empty (nothing was sent)")


def _for_agent(state: WorkerState) -> dict[str, Any]:
    """A worker's state as an agent reads it: the engine's clock times mean nothing to it
    (``seconds`` says how long the worker has worked)."""
    shown = asdict(state)
    del shown["started_at"], shown["ended_at"]
    return shown


def _state_text(state: WorkerState) -> str:
    return dump_json(_for_agent(state))


def states_text(states: Sequence[WorkerState]) -> str:
    """The states as JSON, the first :data:`MAX_LISTED` of them (the rest counted, never dropped unsaid)."""
    text = dump_json([_for_agent(state) for state in states[:MAX_LISTED]])
    more = len(states) - MAX_LISTED
    return text if more <= 0 else f"{text}\n… and {more} more workers, not listed (at most {MAX_LISTED} are)."


_Worker = Annotated[
    str, Field(description="The worker's id (its session id, as start_worker or list_workers gave it).")
]
_Prompt = Annotated[str, Field(description="What the worker is to do, as you would tell a coding agent.")]
_Agent = Annotated[
    str, Field(description="Which agent runs the worker: one polypilot offers (copilot, opencode, demo…).")
]
_Name = Annotated[str, Field(description="A short name for the worker (empty: the agent's name and a number).")]
_Worktree = Annotated[bool, Field(description="Work in a new git worktree of your repository, not in your folder.")]
_Workers = Annotated[list[str], Field(description="The workers' ids; empty: every worker you started.")]
_Until = Annotated[
    WaitUntil,
    Field(
        description="done: every one's turn ended; blocked: that, or one waits for a permission the user "
        "must answer; any: one of them ended or is blocked."
    ),
]
_Timeout = Annotated[
    float,
    Field(
        description=f"Stop waiting after this many seconds (at most {MAX_WAIT_SECONDS:g}) and return their "
        "states as they are.",
        gt=0,
    ),
]
_Start = Annotated[
    int, Field(description=f"The first character to return (at most {REPLY_PAGE_CHARS:,} at once).", ge=0)
]


def build_server(tools: TeamTools) -> MCPServer[Any]:
    """The MCP server whose tools are ``tools``; its tool list says hello to the engine."""

    class Relay(MCPServer[Any]):
        async def list_tools(self) -> Any:
            listed = await super().list_tools()
            await tools.hello()
            return listed

    server = Relay(RELAY_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(structured_output=False)
    async def list_workers() -> str:
        """List the workers you started, each with its id, name, agent and state (queued, starting,
        working, blocked on a permission the user must answer, done, stopped or failed) and how
        its last turn ended."""
        return await tools.list_workers()

    @server.tool(structured_output=False)
    async def start_worker(agent: _Agent, prompt: _Prompt, name: _Name = "", worktree: _Worktree = False) -> str:
        """Start a worker: a new session of ``agent`` given ``prompt`` as its first turn. Returns
        its state, with its id. Refused, saying which bound, when the team's budget is spent;
        queued when the workers at once are all busy."""
        return await tools.start_worker(agent, prompt, name, worktree)

    @server.tool(structured_output=False)
    async def send_worker(worker: _Worker, prompt: _Prompt) -> str:
        """Give a worker another prompt (its next turn; queued while it works). Returns its state."""
        return await tools.send_worker(worker, prompt)

    @server.tool(structured_output=False, description=WAIT_DESCRIPTION)
    async def wait_workers(
        workers: _Workers = [],  # noqa: B006 - the tool's schema default, never mutated
        until: _Until = "done",
        timeout_seconds: _Timeout = WAIT_SLICE_SECONDS,
    ) -> str:
        return await tools.wait_workers(workers, until, timeout_seconds)

    @server.tool(structured_output=False)
    async def read_reply(worker: _Worker, start: _Start = 0) -> str:
        """Read a worker's last reply, whole (a long one in pages), and how its last turn ended."""
        return await tools.read_reply(worker, start)

    @server.tool(structured_output=False)
    async def stop_worker(worker: _Worker) -> str:
        """Stop a worker's turn now. Returns its state."""
        return await tools.stop_worker(worker)

    return server


def _quiet_stderr() -> None:
    """File descriptor 2 to the null device: the agent reads our stderr, and it owes us nothing."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mcp_relay", description="polypilot's team tools for an agent (stdio MCP).")
    parser.add_argument("--socket", required=True, type=Path, help="the engine's Unix socket")
    parser.add_argument("--log", type=Path, default=None, help="a private log file (none: nothing is logged)")
    parser.add_argument(
        "--wait-slice",
        type=float,
        default=WAIT_SLICE_SECONDS,
        help="the longest one wait_workers call waits, in seconds (below the agent's tool-call timeout)",
    )
    args = parser.parse_args(argv)
    capability = os.environ.get(CAPABILITY_ENV, "")
    REDACTOR.learn([capability])  # before the first line is logged
    if args.log is not None:
        setup_file_logging(args.log.parent, args.log.name, logging.INFO)
    else:
        logging.getLogger().addHandler(logging.NullHandler())  # the SDK's basicConfig must find a handler
        logging.raiseExceptions = False
    _quiet_stderr()
    if not capability:
        log.warning("relay: started without %s: every tool will say so", CAPABILITY_ENV)
    client = EngineClient(args.socket, timeout=MAX_WAIT_SECONDS + CALL_SLACK)
    log.info("relay: serving the team tools for the engine on %s", args.socket)
    if not 0 < args.wait_slice <= MAX_WAIT_SECONDS:
        parser.error(f"--wait-slice must be above 0 and at most {MAX_WAIT_SECONDS:g}")
    build_server(TeamTools(client, capability, args.wait_slice)).run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
