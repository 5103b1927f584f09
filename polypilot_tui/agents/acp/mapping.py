"""ACP ``session/update`` payloads mapped onto the engine's event vocabulary.

The mapper works on the RAW camelCase JSON of each update (as seen by the transport
observer), not on the SDK's pydantic models: the SDK silently drops updates that fail its
schema (trap 3: ``usage_update`` with ``used: null``), and one code path for every update
is simpler than a model path plus a fallback.

Live mode turns chunks into deltas and tool calls into start/progress/complete events;
replay mode (``session/load``) folds the replayed conversation into whole messages and
tool rows for :attr:`ConnectResult.history`.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from polypilot_tui.domain import limits
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.gathered import Gathered
from polypilot_tui.domain.text import clip

logger = logging.getLogger(__name__)

Emit = Callable[[AgentEvent], None]

_TOOL_FIELDS = ("title", "kind", "status", "content", "locations", "rawInput", "rawOutput")
_FINAL_STATUSES = ("completed", "failed")
#: Updates forwarded under their own ACP name: unknown to the engine, useful to the UI.
_NOISE_KEYS = frozenset({"cwd", "call_id", "turn_id", "started_at_ms", "description"})
_PASS_THROUGH = ("available_commands_update", "current_mode_update", "config_option_update", "session_info_update")


def block_text(block: Any) -> str:
    """The human text of one ACP ContentBlock."""
    if not isinstance(block, Mapping):
        return ""
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return text if isinstance(text, str) else ""
    if kind == "resource":
        resource = block.get("resource")
        if isinstance(resource, Mapping):
            text = resource.get("text")
            if isinstance(text, str):
                return text
            return f"[resource {resource.get('uri', '')}]"
    if kind == "resource_link":
        return f"[{block.get('name') or block.get('uri') or 'link'}]"
    if kind in ("image", "audio"):
        return f"[{kind}]"
    return ""


def tool_content_text(items: Any) -> str:
    """Text of a tool call's ``content`` list (content blocks, diffs, terminal refs)."""
    if not isinstance(items, list):
        return ""
    parts: list[str] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "content":
            parts.append(block_text(item.get("content")))
        elif kind == "diff":
            parts.append(f"edited {item.get('path', '?')}")
        elif kind == "terminal":
            parts.append(f"[terminal {item.get('terminalId', '?')}]")
    return "\n".join(p for p in parts if p)


def raw_output_text(raw: Any) -> str:
    """Best-effort text of a tool's ``rawOutput`` (agents disagree on its shape)."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, Mapping):
        for key in ("output", "formatted_output", "aggregated_output", "stdout", "content", "result", "error"):
            value = raw.get(key)
            if isinstance(value, str) and value:
                return value
    try:
        return json.dumps(raw, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(raw)


def raw_exit_code(raw: Any) -> int | None:
    """The exit code a shell tool's ``rawOutput`` reports, or None: ``exitCode`` / ``exit_code``
    (codex), opencode's ``metadata.exit`` (its bash tool "completes" whatever the command's exit),
    or the Copilot CLI's ``shell_exit`` part in ``contents``."""
    if not isinstance(raw, Mapping):
        return None
    holders: list[tuple[Any, tuple[str, ...]]] = [
        (raw, ("exitCode", "exit_code")),
        (raw.get("metadata"), ("exit", "exitCode", "exit_code")),
    ]
    parts = raw.get("contents")
    if isinstance(parts, list):
        holders += [
            (p, ("exitCode", "exit_code")) for p in parts if isinstance(p, Mapping) and p.get("type") == "shell_exit"
        ]
    for holder, keys in holders:
        if isinstance(holder, Mapping):
            for key in keys:
                code = holder.get(key)
                if isinstance(code, int) and not isinstance(code, bool):
                    return code
    return None


def summarize_input(raw: Any, limit: int = 300) -> str:
    """One line that says what a tool call will do (its command, path, pattern…)."""
    if raw is None:
        return ""
    if isinstance(raw, Mapping):
        for key in ("command", "cmd", "path", "file_path", "filePath", "pattern", "url", "query"):
            value = raw.get(key)
            if isinstance(value, list):
                value = " ".join(str(v) for v in value)
            if isinstance(value, str) and value:
                return clip(value, limit)
        # Bookkeeping fields alone (opencode starts a bash call with only its cwd) say nothing.
        raw = {k: v for k, v in raw.items() if k not in _NOISE_KEYS}
        if not raw:
            return ""
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str)
    return clip(text, limit)


def _clip(text: str) -> str:
    return limits.bounded(text, limits.TOOL_TEXT_CHARS)  # the count of what is not kept said


class UpdateMapper:
    """Folds raw ``session/update`` objects into engine events (one mapper per turn stream)."""

    def __init__(self, emit: Emit, *, replay: bool = False, prefix: str = "acp") -> None:
        self._emit = emit
        self.replay = replay
        self._prefix = prefix
        self._ids = itertools.count(1)
        self.tools: dict[str, dict[str, Any]] = {}
        self._started: set[str] = set()
        self._done: set[str] = set()
        self._names: dict[str, str] = {}
        self._summaries: dict[str, str] = {}
        """The last input summary shown per tool (agents often fill rawInput in later)."""
        """The name a tool started with; later titles (often a description) do not rename it."""
        self._msg_id: str | None = None
        self._msg_parts = Gathered()
        self._thought_id: str | None = None
        self._thought_parts = Gathered()
        self._user_parts = Gathered()

    # ------------------------------------------------------------------ entry points

    def handle(self, update: Mapping[str, Any]) -> None:
        """Map one raw update; malformed ones are logged and skipped, never raised."""
        kind = update.get("sessionUpdate")
        try:
            if kind == "agent_message_chunk":
                self._message_chunk(update)
            elif kind == "agent_thought_chunk":
                self._thought_chunk(update)
            elif kind == "user_message_chunk":
                self._user_chunk(update)
            elif kind in ("tool_call", "tool_call_update"):
                self._tool(update)
            elif kind == "plan":
                self._flush_user()
                entries = update.get("entries")
                self._emit(AgentEvent(EventType.PLAN, {"entries": list(entries) if isinstance(entries, list) else []}))
            elif kind == "usage_update":
                self._usage(update)
            elif isinstance(kind, str) and not self.replay:
                self._pass_through(kind, update)
        except Exception:  # the agent's data: a shape the mapping does not expect is logged in full, skipped
            # (one odd update must never break the stream), and the mapping is to be fixed
            logger.exception("could not map ACP update %r", kind)

    def note_permission_tool(self, tool_call: Mapping[str, Any]) -> dict[str, Any]:
        """Merge the ``toolCall`` of a permission request (its id may be unknown yet, trap 4);
        returns what is known of the call, the request's content included.

        That content describes what is asked (codex: "Proposed Amendment: …"), not what the
        tool printed, so it is not kept as the call's content: a completion without content of
        its own then showed the question instead of the output (``rawOutput``).
        """
        call_id = str(tool_call.get("toolCallId") or "")
        state = self.tools.setdefault(call_id, {"toolCallId": call_id})
        self._merge(state, {key: value for key, value in tool_call.items() if key != "content"})
        asked = tool_call.get("content")
        return state if asked is None else {**state, "content": asked}

    def begin_turn(self) -> None:
        """A new prompt: message and reasoning ids start afresh."""
        self._msg_id = None
        self._msg_parts = Gathered()
        self._thought_id = None
        self._thought_parts = Gathered()

    def finish(self) -> None:
        """Flush buffered text (the turn or the replay ended)."""
        self._flush_thought()
        self._flush_message()
        self._flush_user()

    def open_tools(self) -> list[str]:
        """Ids of tool calls that started and have not completed."""
        return [i for i in self.tools if i in self._started and i not in self._done]

    def close_open_tools(self, message: str, status: str = "failed") -> None:
        """End every open tool call as not successful (cancel, turn end, replay tail)."""
        for call_id in self.open_tools():
            self._complete(call_id, success=False, error=message, status=status)

    # ------------------------------------------------------------------ messages

    def _message_chunk(self, update: Mapping[str, Any]) -> None:
        text = block_text(update.get("content"))
        self._flush_thought()
        self._flush_user()
        message_id = update.get("messageId")
        if isinstance(message_id, str) and message_id and self._msg_id not in (None, message_id):
            self._flush_message()
        if self._msg_id is None:
            self._msg_id = message_id if isinstance(message_id, str) and message_id else self._new_id("msg")
        if not text:
            return
        self._msg_parts.add(text)
        if not self.replay:
            self._emit(AgentEvent(EventType.MESSAGE_DELTA, {"messageId": self._msg_id, "deltaContent": text}))

    def _thought_chunk(self, update: Mapping[str, Any]) -> None:
        text = block_text(update.get("content"))
        self._flush_user()
        if self._thought_id is None:
            self._thought_id = self._new_id("reasoning")
        if not text:
            return
        self._thought_parts.add(text)
        if not self.replay:
            self._emit(AgentEvent(EventType.REASONING_DELTA, {"reasoningId": self._thought_id, "deltaContent": text}))

    def _user_chunk(self, update: Mapping[str, Any]) -> None:
        # Live, the engine already knows what the user sent; only a replay needs it.
        if not self.replay:
            return
        self._flush_thought()
        self._flush_message()
        text = block_text(update.get("content"))
        if text:
            self._user_parts.add(text)

    def _flush_message(self, tool_requests: list[dict[str, str]] | None = None) -> None:
        if self._msg_id is None:
            return
        content = self._msg_parts.take()
        message_id = self._msg_id
        self._msg_id = None
        if not content and not tool_requests:
            return
        data: dict[str, Any] = {"messageId": message_id, "content": content}
        # A reply that leads into a tool call says so: an assistant.message without tool
        # requests arms the engine's post-completion idle fallback.
        if tool_requests:
            data["toolRequests"] = tool_requests
        self._emit(AgentEvent(EventType.MESSAGE, data))

    def _flush_thought(self) -> None:
        if self._thought_id is None:
            return
        content = self._thought_parts.take()
        reasoning_id = self._thought_id
        self._thought_id = None
        if content:
            self._emit(AgentEvent(EventType.REASONING, {"reasoningId": reasoning_id, "content": content}))

    def _flush_user(self) -> None:
        if self._user_parts:
            content = self._user_parts.take()
            self._emit(AgentEvent(EventType.USER_MESSAGE, {"content": content}))

    # ------------------------------------------------------------------ tools

    def _tool(self, update: Mapping[str, Any]) -> None:
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            logger.warning("ACP tool update without toolCallId: %r", update)
            return
        if call_id in self._done:
            return  # late updates after a cancel or completion (spec: accept, ignore)
        state = self.tools.setdefault(call_id, {"toolCallId": call_id})
        self._merge(state, update)
        # Named after its first announcement: later titles are often a description.
        self._names.setdefault(
            call_id, self._tool_name(update) if update.get("title") or update.get("kind") else self._tool_name(state)
        )
        if call_id not in self._started:
            if (
                state.get("status") in (None, "pending")
                and not summarize_input(state.get("rawInput"))
                and not state.get("content")
            ):
                return  # announced before its input (opencode): start it once we know what it runs
            self._start(call_id, state)
        status = state.get("status")
        if status in _FINAL_STATUSES:
            text = _clip(tool_content_text(state.get("content")) or raw_output_text(state.get("rawOutput")))
            self._complete(
                call_id,
                success=status == "completed",
                error=text or "tool failed",
                text=text,
                status=status,
                exit_code=raw_exit_code(state.get("rawOutput")),
            )
            return
        if self.replay:
            return
        progress = tool_content_text(update.get("content")) if update.get("content") else ""
        summary = summarize_input(state.get("rawInput"))
        if summary != self._summaries.get(call_id):
            self._summaries[call_id] = summary
            progress = progress or summary  # the input came (or changed) after the start
        if progress:
            data: dict[str, Any] = {"toolCallId": call_id, "progressMessage": _clip(progress)}
            if isinstance(state.get("rawInput"), Mapping):
                data["arguments"] = dict(state["rawInput"])
            self._emit(AgentEvent(EventType.TOOL_PROGRESS, data))

    @staticmethod
    def _merge(state: dict[str, Any], update: Mapping[str, Any]) -> None:
        for key in _TOOL_FIELDS:
            value = update.get(key)
            if value is not None:
                state[key] = value

    def _start(self, call_id: str, state: dict[str, Any]) -> None:
        self._started.add(call_id)
        name = self._names.setdefault(call_id, self._tool_name(state))
        self._flush_user()
        self._flush_thought()
        self._flush_message(tool_requests=[{"toolCallId": call_id, "name": name}])
        raw_input = state.get("rawInput")
        self._summaries[call_id] = summarize_input(raw_input)
        arguments = (
            dict(raw_input) if isinstance(raw_input, Mapping) else ({} if raw_input is None else {"input": raw_input})
        )
        self._emit(
            AgentEvent(
                EventType.TOOL_START,
                {
                    "toolCallId": call_id,
                    "toolName": name,
                    "arguments": arguments,
                    "title": state.get("title") or "",
                    "kind": state.get("kind") or "",
                    "detail": summarize_input(raw_input),
                },
            )
        )

    def _complete(
        self, call_id: str, *, success: bool, error: str, text: str = "", status: str = "", exit_code: int | None = None
    ) -> None:
        self._done.add(call_id)
        data: dict[str, Any] = {
            "toolCallId": call_id,
            "toolName": self._names.get(call_id) or self._tool_name(self.tools.get(call_id, {})),
            "success": success,
            "status": status or ("completed" if success else "failed"),
            "result": {"content": text if success or text else error},
        }
        if not success:
            data["error"] = {"message": error}
        if exit_code is not None:  # a shell that "completed" with a non-zero exit (the reducer reads it)
            data["exitCode"] = exit_code
        self._emit(AgentEvent(EventType.TOOL_COMPLETE, data))

    @staticmethod
    def _tool_name(state: Mapping[str, Any]) -> str:
        return str(state.get("title") or state.get("kind") or "tool")

    # ------------------------------------------------------------------ the rest

    def _usage(self, update: Mapping[str, Any]) -> None:
        if self.replay:
            return
        data: dict[str, Any] = {}
        if isinstance(update.get("used"), (int, float)):
            data["currentTokens"] = update["used"]
        if isinstance(update.get("size"), (int, float)):
            data["tokenLimit"] = update["size"]
        if isinstance(update.get("cost"), Mapping):
            data["cost"] = dict(update["cost"])
        self._emit(AgentEvent(EventType.SESSION_USAGE_INFO, data))

    def _pass_through(self, kind: str, update: Mapping[str, Any]) -> None:
        data = {k: v for k, v in update.items() if k != "sessionUpdate"}
        if kind not in _PASS_THROUGH:
            logger.debug("unknown ACP update %s passed through", kind)
        self._emit(AgentEvent(kind, data))
        if kind == "session_info_update" and isinstance(update.get("title"), str):
            self._emit(AgentEvent(EventType.SESSION_TITLE_CHANGED, {"title": update["title"]}))

    def _new_id(self, what: str) -> str:
        return f"{self._prefix}-{what}-{next(self._ids)}"
