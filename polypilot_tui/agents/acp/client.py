"""The client side of an ACP connection: permission prompts, fs access, raw transcript.

``session/update`` notifications are NOT handled here: the backend maps them from the raw
transport observer (see :mod:`polypilot_tui.agents.acp.mapping`), so updates the SDK's
schema rejects are still seen.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.interfaces import Agent
from acp.schema import (
    AllowedOutcome,
    CreateElicitationResponse,
    CreateTerminalResponse,
    DeniedOutcome,
    ElicitationMode,
    EnvVariable,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from polypilot_tui.agents.acp.mapping import Emit, summarize_input, tool_content_text
from polypilot_tui.agents.base import ALLOW_ALWAYS, ALLOW_ONCE, CANCELLED, REJECT_ONCE, BackendError
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.limits import AGENT_READ_BYTES, ROW_CHARS, bounded_texts, has_longer_text
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.sandbox import SandboxRules
from polypilot_tui.domain.sandbox_policy import ACP_INPUT_KEYS
from polypilot_tui.infra.beneath import LinkOnTheWay, open_beneath
from polypilot_tui.infra.private import open_private
from polypilot_tui.infra.redact import REDACTOR, StreamTails

logger = logging.getLogger(__name__)

#: Refuse to hand bigger files to an agent in one read.
MAX_READ_BYTES = AGENT_READ_BYTES
#: Stop appending to the transcript past this size (a marker line says so).
MAX_TRANSCRIPT_BYTES = 50_000_000
REJECT_ALWAYS = "reject_always"
_CHUNK_TEXT = frozenset({"text"})
"""Where a ``*_chunk`` update carries its piece of the stream (``content.text``)."""
# A generic option id the manager may send, and the kinds that can stand in for it.
_KIND_FALLBACK = {
    ALLOW_ONCE: (ALLOW_ONCE, ALLOW_ALWAYS),
    ALLOW_ALWAYS: (ALLOW_ALWAYS, ALLOW_ONCE),
    REJECT_ONCE: (REJECT_ONCE, REJECT_ALWAYS),
    REJECT_ALWAYS: (REJECT_ALWAYS, REJECT_ONCE),
}


@dataclass
class _Pending:
    future: asyncio.Future[str]
    tool_call_id: str
    options: list[dict[str, str]]


PLACED_INPUT_CHARS = 16_000
"""The longest command or path list a permission request carries for the policy to place."""


def placed_input(tool_call: Mapping[str, Any]) -> dict[str, Any]:
    """What ``allow-in-sandbox`` reads of a tool call: its locations' paths and the parts of its
    ``rawInput`` that name places (domain/sandbox_policy.py); nothing when they are too long to
    carry whole (a cut command could hide what it names: the policy then asks)."""
    raw = tool_call.get("rawInput")
    raw = raw if isinstance(raw, Mapping) else {}
    locations = tool_call.get("locations")
    placed = {
        "locations": [
            {"path": loc["path"]}
            for loc in (locations if isinstance(locations, list) else [])
            if isinstance(loc, Mapping) and isinstance(loc.get("path"), str)
        ],
        "rawInput": {key: raw[key] for key in ACP_INPUT_KEYS if key in raw},
    }
    return {"inputTooLong": True} if len(dump_json(placed)) > PLACED_INPUT_CHARS else placed


class PermissionDesk:
    """Open permission requests as futures the user (via the manager) resolves."""

    def __init__(self, emit: Emit, describe: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> None:
        self._emit = emit
        self._describe = describe
        self._ids = itertools.count(1)
        self._pending: dict[str, _Pending] = {}

    @property
    def pending(self) -> list[str]:
        return list(self._pending)

    async def ask(self, tool_call: Mapping[str, Any], options: list[dict[str, str]]) -> str:
        """Emit ``permission.requested`` and wait for the chosen option id (or "cancelled")."""
        request_id = f"perm-{next(self._ids)}"
        state = self._describe(tool_call)
        call_id = str(tool_call.get("toolCallId") or "")
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = _Pending(future, call_id, options)
        detail = summarize_input(state.get("rawInput")) or tool_content_text(state.get("content"))
        self._emit(
            AgentEvent(
                EventType.PERMISSION_REQUESTED,
                {
                    "requestId": request_id,
                    "toolCallId": call_id,
                    "kind": state.get("kind") or "",
                    "title": state.get("title") or state.get("kind") or "tool",
                    "detail": detail,
                    "options": options,
                    **placed_input(state),
                },
            )
        )
        try:
            return await future
        finally:
            self._pending.pop(request_id, None)

    def answer(self, request_id: str, option_id: str) -> None:
        """Resolve one request; unknown ids (already answered or cancelled) are ignored."""
        pending = self._pending.get(request_id)
        if pending is None or pending.future.done():
            logger.info("permission %s is no longer pending; answer %s ignored", request_id, option_id)
            return
        chosen = CANCELLED if option_id == CANCELLED else self._match(pending, option_id)
        self._resolve(request_id, pending, chosen)

    def cancel_all(self, emit: bool = True) -> None:
        """Answer every open request with "cancelled" (stop, turn end, connection loss)."""
        for request_id, pending in list(self._pending.items()):
            if not pending.future.done():
                self._resolve(request_id, pending, CANCELLED, emit=emit)

    @staticmethod
    def _match(pending: _Pending, option_id: str) -> str:
        ids = [o["optionId"] for o in pending.options]
        if option_id in ids:
            return option_id
        for kind in _KIND_FALLBACK.get(option_id, ()):
            for option in pending.options:
                if option.get("kind") == kind:
                    return option["optionId"]
        raise BackendError(f"option {option_id!r} is not offered (offered: {', '.join(ids) or 'none'})")

    def _resolve(self, request_id: str, pending: _Pending, chosen: str, emit: bool = True) -> None:
        pending.future.set_result(chosen)
        option_kind = next((o.get("kind", "") for o in pending.options if o["optionId"] == chosen), "")
        if chosen == CANCELLED:
            verdict = "cancelled"
        elif option_kind.startswith("allow"):
            verdict = "approved"
        else:
            verdict = "denied-interactively-by-user"
        if emit:
            self._emit(
                AgentEvent(
                    EventType.PERMISSION_COMPLETED,
                    {
                        "requestId": request_id,
                        "toolCallId": pending.tool_call_id,
                        "optionId": chosen,
                        "optionKind": option_kind,
                        "outcome": "cancelled" if chosen == CANCELLED else "selected",
                        "result": {"kind": verdict},
                    },
                )
            )


class Transcript:
    """Every raw JSON-RPC message in and out, one JSON object a line, redacted, 0600, capped; a
    text longer than the engine keeps (limits.ROW_CHARS) is kept as far, the cut said."""

    def __init__(self, path: Path, clock: Clock, max_bytes: int = MAX_TRANSCRIPT_BYTES) -> None:
        self.path = path
        self._clock = clock
        self._max = max_bytes
        REDACTOR.learn_environment()
        # 0600: it holds every message, code and tool output included. Lives as long as the agent.
        self._fh = os.fdopen(open_private(path), "a", encoding="utf-8", errors="replace")
        self._size = os.fstat(self._fh.fileno()).st_size
        self._full = False
        self._streams = StreamTails()

    def _redacted(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        """The message with every text in it redacted (the structure, not its JSON text: a
        value keeps its quotes); a streamed chunk's text read after what its stream said before."""
        params = message.get("params")
        update = params.get("update") if isinstance(params, Mapping) else None
        kind = update.get("sessionUpdate") if isinstance(update, Mapping) else None
        if message.get("method") == "session/update" and isinstance(kind, str) and kind.endswith("_chunk"):
            return self._streams.scrub((params.get("sessionId"), kind), message, pieces=_CHUNK_TEXT)  # type: ignore[union-attr]
        return REDACTOR.scrub(message, pieces=())

    def write(self, direction: str, message: Mapping[str, Any]) -> None:
        if self._fh.closed or self._full:
            return
        if has_longer_text(message, ROW_CHARS):  # kept as the engine keeps it: a 20 MB line is not copied thrice
            message = bounded_texts(message, ROW_CHARS)
        line = dump_json({"at": round(self._clock.wall(), 3), "dir": direction, "msg": self._redacted(message)}) + "\n"
        if self._size + len(line) > self._max:
            line = (
                dump_json(
                    {
                        "at": round(self._clock.wall(), 3),
                        "dir": "note",
                        "msg": f"transcript cap of {self._max} bytes reached; later messages dropped",
                    }
                )
                + "\n"
            )
            self._full = True
        try:
            self._fh.write(line)
            self._fh.flush()
            self._size += len(line)
        except OSError:
            logger.exception("cannot write ACP transcript %s", self.path)
            self._full = True

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError:
            pass


class AcpClient:
    """What the agent may ask of us: permissions, and text files inside the session folder.

    Implements the SDK's whole ``acp.interfaces.Client`` protocol. Terminals and elicitation
    are refused: initialize advertises ``terminal=False`` and the unstable protocol is off.
    """

    def __init__(self, root: Path, desk: PermissionDesk, sandbox: SandboxRules | None = None) -> None:
        self._root = root.resolve()
        self._desk = desk
        self._sandbox = sandbox
        """A sandboxed session's rules: we read and write outside its sandbox, so a file its
        sandbox keeps read-only (a git hook, ``.git``) is not written here either, nor one it
        hides (``~/.config/gh`` of a session working in ``~/.config``) read."""

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        raw_call = tool_call.model_dump(mode="json", by_alias=True, exclude_none=True)
        offered = [{"optionId": o.option_id, "name": o.name, "kind": o.kind} for o in options]
        choice = await self._desk.ask(raw_call, offered)
        if choice == CANCELLED:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=choice, outcome="selected"))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None  # mapped from the raw stream by the backend

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        target = self._inside(path)
        if self._sandbox is not None and not self._sandbox.may_read(str(target)):
            raise RequestError(-32602, f"refused by the sandbox: {path} is hidden from this session")
        content = await asyncio.to_thread(_read_lines, self._root, target, line, limit)
        return ReadTextFileResponse(content=content)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        target = self._inside(path)
        if self._sandbox is not None and not self._sandbox.may_write(str(target)):
            raise RequestError(-32602, f"refused by the sandbox: {path} is read-only for this session")
        await asyncio.to_thread(_write_text, self._root, target, content)
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        raise RequestError.method_not_found("terminal/create")

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        raise RequestError.method_not_found("terminal/output")

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> ReleaseTerminalResponse:
        raise RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        raise RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> KillTerminalResponse:
        raise RequestError.method_not_found("terminal/kill")

    async def create_elicitation(self, message: str, mode: ElicitationMode, **kwargs: Any) -> CreateElicitationResponse:
        raise RequestError.method_not_found("elicitation/create")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        logger.debug("ACP elicitation %s completion ignored", elicitation_id)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        logger.debug("ACP extension notification %s ignored", method)

    def on_connect(self, conn: Agent) -> None:
        return None  # everything the agent may call is routed to the methods above

    def _inside(self, path: str) -> Path:
        """The resolved path, refused unless it is absolute and inside the session folder."""
        candidate = Path(path)
        if not candidate.is_absolute():
            raise RequestError(-32602, f"path must be absolute: {path}")
        resolved = candidate.resolve()
        if not resolved.is_relative_to(self._root):
            raise RequestError(-32602, f"refused: {path} is outside the session folder {self._root}")
        return resolved


def _read_lines(root: Path, target: Path, line: int | None, limit: int | None) -> str:
    try:
        fd = open_beneath(root, target, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO would block us for good
    except LinkOnTheWay:
        raise RequestError(-32602, f"refused: a part of {target} is a link") from None
    except FileNotFoundError:
        raise RequestError.resource_not_found(str(target)) from None
    except IsADirectoryError:
        raise RequestError(-32602, f"{target} is a directory") from None
    with os.fdopen(fd, "rb") as file:
        found = os.fstat(file.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise RequestError(-32602, f"{target} is not a regular file")
        if found.st_size > MAX_READ_BYTES:
            raise RequestError(-32602, f"{target} is larger than {MAX_READ_BYTES} bytes")
        text = file.read(MAX_READ_BYTES + 1).decode("utf-8", errors="replace")
    if line is None and limit is None:
        return text
    lines = text.splitlines(keepends=True)
    start = max(0, (line or 1) - 1)
    end = None if limit is None else start + max(0, limit)
    return "".join(lines[start:end])


def _write_text(root: Path, target: Path, content: str) -> None:
    """Write ``content`` to ``target`` under ``root``, no link followed on the way: the agent
    may swap a folder of the path for a link between our check and this write."""
    try:
        fd = open_beneath(root, target, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, make_folders=True)
    except LinkOnTheWay:
        raise RequestError(-32602, f"refused: a part of {target} is a link") from None
    with os.fdopen(fd, "wb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise RequestError(-32602, f"{target} is not a regular file")
        file.truncate(0)
        file.write(content.encode("utf-8"))
