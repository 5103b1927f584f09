"""The demo agent's scripts: friendly replies, and the failure modes PolyPilot met in the wild.

A prompt starting with ``!name`` runs that script (``!zero-idle``, ``!dead-send`` …); an
agent entry may set ``script = "name"`` as its default. Otherwise the prompt's words pick a
plain reply, a tool run, or a tool that needs permission.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import field
from typing import Any, Protocol

from polypilot_tui.agents.base import ALLOW_ALWAYS, ALLOW_ONCE
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.events import EventType


class ScriptedAgent(Protocol):
    """What a script drives: the demo backend, seen from its scripts."""

    def emit(self, kind: str, data: dict[str, Any]) -> None: ...

    async def pause(self, seconds: float) -> None: ...

    def die(self, reason: str) -> None: ...

    async def ask_permission(self, call_id: str, title: str, detail: str) -> str: ...

    def tool_started(self, call_id: str, name: str) -> None: ...

    def tool_finished(self, call_id: str) -> None: ...


Script = Callable[[ScriptedAgent, str], Awaitable[None]]
_ids = itertools.count(1)

DENIAL = "Permission denied and could not request permission from user"


def _new_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


async def _say(agent: ScriptedAgent, text: str, gap: float = 0.05, words_per_delta: int = 3) -> str:
    message_id = _new_id("msg")
    words = text.split(" ")
    for i in range(0, len(words), words_per_delta):
        chunk = " ".join(words[i : i + words_per_delta]) + (" " if i + words_per_delta < len(words) else "")
        agent.emit(EventType.MESSAGE_DELTA, {"messageId": message_id, "deltaContent": chunk})
        await agent.pause(gap)
    return message_id


async def _reply(agent: ScriptedAgent, text: str, final: bool, tool: dict[str, str] | None = None) -> None:
    message_id = await _say(agent, text)
    agent.emit(
        EventType.MESSAGE,
        {"messageId": message_id, "content": text, "toolRequests": [tool] if tool and not final else []},
    )


async def _tool(
    agent: ScriptedAgent,
    name: str,
    command: str,
    output: str,
    seconds: float = 0.6,
    success: bool = True,
    error: str = "",
) -> str:
    call_id = _new_id("call")
    agent.tool_started(call_id, name)
    agent.emit(EventType.TOOL_START, {"toolCallId": call_id, "toolName": name, "arguments": {"command": command}})
    await agent.pause(seconds / 2)
    agent.emit(EventType.TOOL_PROGRESS, {"toolCallId": call_id, "progressMessage": f"$ {command}"})
    await agent.pause(seconds / 2)
    data: dict[str, object] = {"toolCallId": call_id, "toolName": name, "success": success}
    data.update({"result": {"content": output}} if success else {"error": {"message": error}})
    agent.tool_finished(call_id)
    agent.emit(EventType.TOOL_COMPLETE, data)
    return call_id


def _start(agent: ScriptedAgent) -> None:
    agent.emit(EventType.TURN_START, {"turnId": _new_id("turn")})


def _end(agent: ScriptedAgent, idle: bool = True) -> None:
    agent.emit(EventType.TURN_END, {})
    if idle:
        agent.emit(EventType.SESSION_IDLE, {})


async def chat(agent: ScriptedAgent, prompt: str) -> None:
    """A plain streamed markdown reply."""
    _start(agent)
    agent.emit(EventType.REASONING_DELTA, {"reasoningId": "r1", "deltaContent": "The user wants a short answer."})
    await agent.pause(0.2)
    await _reply(
        agent,
        f"You said: **{prompt[:200]}**\n\nThis is the *demo agent*: it runs offline and "
        "shows how sessions stream, run tools and ask for permission. Try `!help`.",
        final=True,
    )
    _end(agent)


async def tools(agent: ScriptedAgent, prompt: str) -> None:
    """Text, a tool call, then a summary: the common shape of a coding-agent turn."""
    _start(agent)
    await _reply(agent, "Let me look at the project first.", final=False, tool={"toolCallId": "t", "name": "bash"})
    await _tool(agent, "bash", "ls -1", "README.md\nsrc\ntests")
    _end(agent, idle=False)
    _start(agent)
    await _reply(
        agent,
        "The project has a `README.md`, a `src/` folder and `tests/`.\n\n"
        "- Everything looks in order.\n- Ask me to *write* something to see a permission prompt.",
        final=True,
    )
    _end(agent)


async def permission(agent: ScriptedAgent, prompt: str) -> None:
    """A tool that needs the user's permission first."""
    _start(agent)
    await _reply(agent, "I need to write a file for that.", final=False, tool={"toolCallId": "t", "name": "bash"})
    call_id = _new_id("call")
    agent.tool_started(call_id, "bash")
    agent.emit(
        EventType.TOOL_START,
        {"toolCallId": call_id, "toolName": "bash", "arguments": {"command": "echo hello > notes.txt"}},
    )
    choice = await agent.ask_permission(call_id, "Run shell command: echo hello > notes.txt", "echo hello > notes.txt")
    allowed = choice in (ALLOW_ONCE, ALLOW_ALWAYS)
    agent.tool_finished(call_id)
    agent.emit(
        EventType.TOOL_COMPLETE,
        {
            "toolCallId": call_id,
            "toolName": "bash",
            "success": allowed,
            **(
                {"result": {"content": "wrote notes.txt"}}
                if allowed
                else {"error": {"message": "The user rejected this tool call."}}
            ),
        },
    )
    _end(agent, idle=False)
    _start(agent)
    await _reply(
        agent, "Done: `notes.txt` written." if allowed else "Understood, I did not write the file.", final=True
    )
    _end(agent)


async def slow(agent: ScriptedAgent, prompt: str) -> None:
    """A long stream (about 30 s): good for trying Stop."""
    _start(agent)
    message_id = _new_id("msg")
    for i in range(60):
        agent.emit(EventType.MESSAGE_DELTA, {"messageId": message_id, "deltaContent": f"word{i} "})
        await agent.pause(0.5)
    _end(agent)


async def zero_idle(agent: ScriptedAgent, prompt: str) -> None:
    """The SDK never sends session.idle (#299): the TurnEnd fallback completes the turn."""
    _start(agent)
    await _reply(agent, "Here is the answer, but my session.idle will never come.", final=True)
    _end(agent, idle=False)


async def hang_after_final_tool(agent: ScriptedAgent, prompt: str) -> None:
    """The final tool result and reply arrive, then nothing (gh-aw's post-completion hang)."""
    _start(agent)
    await _reply(agent, "Filing the issue.", final=False, tool={"toolCallId": "t", "name": "bash"})
    await _tool(agent, "bash", "gh issue create", "Issue filed successfully")
    await _reply(agent, "Issue filed successfully.", final=True)


async def permission_loss(agent: ScriptedAgent, prompt: str) -> None:
    """The permission binding is lost (#300): three tools fail with denials, then silence."""
    _start(agent)
    for _ in range(3):
        await _tool(agent, "bash", "git status", "", success=False, error=DENIAL)
    await agent.pause(10_000)


async def permission_loss_mixed(agent: ScriptedAgent, prompt: str) -> None:
    """Denials with successes in between: 3 of 5 still trips the window; no resend after it."""
    _start(agent)
    await _tool(agent, "bash", "git status", "", success=False, error=DENIAL)
    await _tool(agent, "bash", "echo ok", "ok")
    await _tool(agent, "bash", "git diff", "", success=False, error=DENIAL)
    await _tool(agent, "bash", "echo still ok", "still ok")
    await _tool(agent, "bash", "git log", "", success=False, error=DENIAL)
    await agent.pause(10_000)


async def crash_mid_tool(agent: ScriptedAgent, prompt: str) -> None:
    """The agent process dies while a tool runs (#393 on the next resume)."""
    _start(agent)
    call_id = _new_id("call")
    agent.emit(EventType.TOOL_START, {"toolCallId": call_id, "toolName": "bash", "arguments": {"command": "make"}})
    await agent.pause(2)
    agent.die("demo agent crashed mid-tool")


async def usage_flood(agent: ScriptedAgent, prompt: str) -> None:
    """Only usage events, every 10 s, forever (#230): they must not count as progress."""
    _start(agent)
    for i in range(10_000):
        agent.emit(EventType.SESSION_USAGE_INFO, {"currentTokens": 1000 + i, "tokenLimit": 128000})
        await agent.pause(10)


async def hang(agent: ScriptedAgent, prompt: str) -> None:
    """The model hangs before its first token."""
    _start(agent)
    await agent.pause(1_000_000)


async def long_tool(agent: ScriptedAgent, prompt: str) -> None:
    """A build that runs 9 minutes: slower than any tier but the tool tier. Must NOT be killed."""
    _start(agent)
    await _tool(agent, "bash", "make all", "build ok", seconds=540)
    _end(agent, idle=False)
    _start(agent)
    await _reply(agent, "The build passed.", final=True)
    _end(agent)


async def tool_hang(agent: ScriptedAgent, prompt: str) -> None:
    """A tool that never returns."""
    _start(agent)
    call_id = _new_id("call")
    agent.tool_started(call_id, "bash")
    agent.emit(EventType.TOOL_START, {"toolCallId": call_id, "toolName": "bash", "arguments": {"command": "sleep inf"}})
    await agent.pause(1_000_000)


async def help_text(agent: ScriptedAgent, prompt: str) -> None:
    """Lists the scripts."""
    _start(agent)
    names = "\n".join(
        f"- `!{name}` — {fn.__doc__.strip().splitlines()[0] if fn.__doc__ else ''}"
        for name, fn in sorted(SCRIPTS.scripts.items())
    )
    await _reply(agent, f"Demo scripts:\n\n{names}", final=True)
    _end(agent)


@dataclass(frozen=True)
class ScriptBook:
    """Named scripts; ``faults`` fire once per agent session (a reconnect heals them)."""

    scripts: dict[str, Script] = field(default_factory=dict)
    faults: frozenset[str] = frozenset()

    def get(self, name: str) -> Script:
        return self.scripts.get(name, tools)


SCRIPTS = ScriptBook(
    {
        "chat": chat,
        "tools": tools,
        "permission": permission,
        "slow": slow,
        "zero-idle": zero_idle,
        "hang-after-final-tool": hang_after_final_tool,
        "permission-loss": permission_loss,
        "permission-loss-mixed": permission_loss_mixed,
        "crash-mid-tool": crash_mid_tool,
        "usage-flood": usage_flood,
        "dead-send": hang,
        "hang": hang,
        "long-tool": long_tool,
        "tool-hang": tool_hang,
        "help": help_text,
    },
    frozenset({"permission-loss", "permission-loss-mixed", "crash-mid-tool", "dead-send"}),
)


def pick_script(prompt: str, default: str | None) -> str:
    """``!name`` picks a script; else the agent's default; else the prompt's words decide."""
    text = prompt.strip()
    if text.startswith("!"):
        name = text[1:].split()[0].lower() if len(text) > 1 else "help"
        return name if name in SCRIPTS.scripts else "help"
    if default and default in SCRIPTS.scripts:
        return default
    low = text.lower()
    if any(word in low for word in ("write", "edit", "create", "permission", "delete")):
        return "permission"
    if any(word in low for word in ("slow", "long", "essay")):
        return "slow"
    if len(low.split()) <= 3:
        return "chat"
    return "tools"
