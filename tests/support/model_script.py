"""What the scripted model answers: a pure function of one request body.

The reply is decided from the LAST message of the conversation only. A tool result there
means "answer the tool result"; otherwise a keyword in the last user text picks the
behaviour (checked as whole words, longest first):

- ``HANGAFTERTOOL``: one shell tool call; the follow-up request (with its result) hangs.
- ``SLEEPTOOL``: one shell tool call running ``sleep 20`` (the server's ``sleep_cmd``).
- ``TOOL``: one shell tool call (``echo hi``, or ``CMD=<...>`` / ``CMD=`...``` from the
  prompt, or the server's ``cmd``); after the result, the text ``done: <result>``.
- ``STEPS=<json list>``: tool calls played one per request, ``[{"tool": suffix, "args": {...}}, …]``:
  step i is played when the conversation holds i tool results since the last user message,
  then the answer is those results' text, one a line. A tool is matched by the suffix of its
  name (Copilot names an MCP server's tools ``<server>-<tool>``, opencode ``<server>_<tool>``).
  A string argument ``{{N.field}}`` is the field of step N's result read as JSON (a worker's
  id from ``start_worker``), ``{{N}}`` its whole text.
- ``SLOW``: many text chunks, spaced out.
- ``HANG``: response headers, then nothing until the server stops or the client leaves.
- anything else: ``echo: <prompt>``.

Requests that offer no tools (title / summary requests) always get a short plain answer.
The shell tool is whichever the request offers: ``bash``, ``exec_command``,
``run_shell_command``, ``Bash`` (or any tool whose name mentions bash/shell).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

ReplyKind = Literal["text", "tool", "slow", "hang"]

#: Preferred shell tool names, in order (Copilot, codex, gemini, claude, generic).
SHELL_TOOLS: tuple[str, ...] = ("bash", "exec_command", "run_shell_command", "Bash", "shell")

_KEYWORDS: tuple[str, ...] = ("HANGAFTERTOOL", "SLEEPTOOL", "TOOL", "SLOW", "HANG")
_HANG_AFTER_TAG = "hangafter"
_WRAPPER_BLOCK = re.compile(r"<([a-zA-Z_][\w-]*)>.*?</\1>", re.DOTALL)
_CMD_ANGLE = re.compile(r"CMD=<(.+?)>(?=\s|$)", re.DOTALL)
_CMD_TICKS = re.compile(r"CMD=`([^`]+)`")
_STEPS = re.compile(r"STEPS=(\[.*\])", re.DOTALL)
_REF = re.compile(r"\{\{(\d+)(?:\.(\w+))?\}\}")


@dataclass(frozen=True)
class ScriptSettings:
    """Server-wide knobs of the script."""

    cmd: str = "echo hi"
    sleep_cmd: str = "sleep 20"
    slow_chunks: int = 40
    slow_interval: float = 0.25
    model: str = "gpt-4.1"


@dataclass(frozen=True)
class Reply:
    """One planned answer: text, a tool call, a slow text stream or a hang."""

    kind: ReplyKind
    text: str = ""
    tool_name: str = ""
    arguments: str = ""
    """JSON-encoded tool arguments."""
    call_id: str = ""
    chunks: tuple[str, ...] = ()
    """Text pieces for ``slow`` (and ``text``, one piece)."""
    interval: float = 0.0


def content_text(content: Any) -> str:
    """The plain text of a message ``content`` (string or list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return ""


def clean_prompt(text: str) -> str:
    """The user's words without the agent's wrapper blocks (``<current_datetime>…``)."""
    return _WRAPPER_BLOCK.sub("", text).strip()


def offered_tools(body: dict[str, Any]) -> list[str]:
    """Names of the function tools a Chat Completions or Responses request offers."""
    names: list[str] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function")
        name = fn.get("name") if isinstance(fn, dict) else tool.get("name")
        if isinstance(name, str):
            names.append(name)
    return names


def shell_tool(names: list[str]) -> str | None:
    """The shell tool to call, or None when the request offers none."""
    for preferred in SHELL_TOOLS:
        if preferred in names:
            return preferred
    for name in names:
        if "bash" in name.lower() or "shell" in name.lower():
            return name
    return None


def shell_arguments(tool: str, command: str) -> str:
    """Arguments in the shape each agent's shell tool expects."""
    if tool == "exec_command":
        return json.dumps({"cmd": command})
    if tool == "shell":
        return json.dumps({"command": ["bash", "-lc", command]})
    return json.dumps({"command": command, "description": "Run a shell command"})


@dataclass(frozen=True)
class LastMessage:
    """The one message the script looks at."""

    role: Literal["user", "tool", "other"]
    text: str
    call_id: str = ""


def last_chat_message(body: dict[str, Any]) -> LastMessage:
    """The last message of a Chat Completions request."""
    messages = body.get("messages") or []
    if not messages or not isinstance(messages[-1], dict):
        return LastMessage("other", "")
    last = messages[-1]
    text = content_text(last.get("content"))
    if last.get("role") == "tool":
        return LastMessage("tool", text, str(last.get("tool_call_id") or ""))
    if last.get("role") == "user":
        return LastMessage("user", text)
    return LastMessage("other", text)


def last_responses_item(body: dict[str, Any]) -> LastMessage:
    """The last input item of a Responses API request."""
    items = body.get("input")
    if isinstance(items, str):
        return LastMessage("user", items)
    if not isinstance(items, list) or not items or not isinstance(items[-1], dict):
        return LastMessage("other", "")
    last = items[-1]
    if last.get("type") == "function_call_output":
        output = last.get("output")
        return LastMessage("tool", content_text(output), str(last.get("call_id") or ""))
    if last.get("role") == "user":
        return LastMessage("user", content_text(last.get("content")))
    return LastMessage("other", content_text(last.get("content")))


def keyword(text: str) -> str | None:
    """The behaviour keyword in a prompt (whole words, longest first)."""
    for word in _KEYWORDS:
        if re.search(rf"\b{word}\b", text):
            return word
    return None


def prompt_command(text: str) -> str | None:
    """A ``CMD=<...>`` or ``CMD=`...``` override in the prompt."""
    for pattern in (_CMD_TICKS, _CMD_ANGLE):
        found = pattern.search(text)
        if found:
            return found.group(1).strip()
    return None


@dataclass(frozen=True)
class Turn:
    """The conversation since its last user message: that message and the tool results since."""

    prompt: str
    results: tuple[str, ...]


def chat_turn(body: dict[str, Any]) -> Turn:
    """The current turn of a Chat Completions request."""
    results: list[str] = []
    for message in reversed(body.get("messages") or []):
        if not isinstance(message, dict):
            continue
        if message.get("role") == "tool":
            results.append(content_text(message.get("content")))
        elif message.get("role") == "user":
            return Turn(clean_prompt(content_text(message.get("content"))), tuple(reversed(results)))
    return Turn("", tuple(reversed(results)))


def responses_turn(body: dict[str, Any]) -> Turn:
    """The current turn of a Responses API request."""
    items = body.get("input")
    if isinstance(items, str):
        return Turn(clean_prompt(items), ())
    results: list[str] = []
    for item in reversed(items if isinstance(items, list) else []):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call_output":
            results.append(content_text(item.get("output")))
        elif item.get("role") == "user":
            return Turn(clean_prompt(content_text(item.get("content"))), tuple(reversed(results)))
    return Turn("", tuple(reversed(results)))


def prompt_steps(prompt: str) -> list[Any] | str | None:
    """The ``STEPS=`` list of a prompt, None when it has none, or why it cannot be read."""
    found = _STEPS.search(prompt)
    if found is None:
        return None
    try:
        steps = json.loads(found.group(1))
    except ValueError as exc:
        return f"STEPS is not a JSON list: {exc}"
    ok = isinstance(steps, list) and all(isinstance(s, dict) and isinstance(s.get("tool"), str) for s in steps)
    return steps if ok else 'STEPS must be a list of {"tool": name suffix, "args": {...}}'


def tool_named(suffix: str, tools: list[str]) -> str | None:
    """The offered tool whose name is ``suffix``, or ends with it after a separator."""
    if suffix in tools:
        return suffix
    return next((name for name in tools if name.endswith(("-" + suffix, "_" + suffix, "." + suffix))), None)


def _filled(value: Any, results: tuple[str, ...]) -> Any:
    """``value`` with ``{{N.field}}`` references to earlier results filled in."""
    if isinstance(value, list):
        return [_filled(v, results) for v in value]
    if isinstance(value, dict):
        return {k: _filled(v, results) for k, v in value.items()}
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        index, field = int(match.group(1)), match.group(2)
        text = results[index] if index < len(results) else ""
        if field is None:
            return text
        try:
            return str(json.loads(text).get(field, ""))
        except (ValueError, AttributeError):
            return ""

    return _REF.sub(one, value)


def steps_reply(steps: list[Any], turn: Turn, tools: list[str], serial: int) -> Reply:
    """The next tool call of ``steps``, or the results' text once every step was played."""
    done = len(turn.results)
    if done >= len(steps):
        text = "\n".join(result.strip() for result in turn.results) or "no steps"
        return Reply("text", text=text, chunks=(text,))
    step = steps[done]
    name = tool_named(step["tool"], tools)
    if name is None:
        text = f"no tool named like {step['tool']!r} was offered (offered: {', '.join(tools)})"
        return Reply("text", text=text, chunks=(text,))
    arguments = json.dumps(_filled(step.get("args") or {}, turn.results))
    return Reply("tool", tool_name=name, arguments=arguments, call_id=f"call_{serial}_step{done}")


def plan_reply(
    last: LastMessage, tools: list[str], settings: ScriptSettings, serial: int, turn: Turn | None = None
) -> Reply:
    """Decide the answer to one request from its last message and offered tools (and, for
    ``STEPS``, its ``turn``: the last user message and the tool results since)."""
    steps = prompt_steps(turn.prompt) if turn is not None and tools else None
    if isinstance(steps, str):
        return Reply("text", text=steps, chunks=(steps,))
    if steps is not None and turn is not None:
        return steps_reply(steps, turn, tools, serial)
    if last.role == "tool":
        if _HANG_AFTER_TAG in last.call_id:
            return Reply("hang")
        result = last.text.strip()
        return Reply("text", text=f"done: {result}", chunks=(f"done: {result}",))
    prompt = clean_prompt(last.text)
    if not tools:
        short = " ".join(prompt.split())[:60] or "ok"
        return Reply("text", text=f"echo: {short}", chunks=(f"echo: {short}",))
    word = keyword(prompt)
    if word in ("TOOL", "SLEEPTOOL", "HANGAFTERTOOL"):
        tool = shell_tool(tools)
        if tool is None:
            text = "no shell tool was offered"
            return Reply("text", text=text, chunks=(text,))
        command = settings.sleep_cmd if word == "SLEEPTOOL" else prompt_command(prompt) or settings.cmd
        tag = _HANG_AFTER_TAG if word == "HANGAFTERTOOL" else "tool"
        return Reply(
            "tool",
            tool_name=tool,
            arguments=shell_arguments(tool, command),
            call_id=f"call_{serial}_{tag}",
        )
    if word == "SLOW":
        chunks = tuple(f"word{i} " for i in range(settings.slow_chunks))
        return Reply("slow", text="".join(chunks), chunks=chunks, interval=settings.slow_interval)
    if word == "HANG":
        return Reply("hang")
    text = f"echo: {prompt}"
    return Reply("text", text=text, chunks=(text,))
