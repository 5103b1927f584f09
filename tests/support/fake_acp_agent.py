"""A scripted ACP agent for tests, built with the SDK's agent side.

Run as ``python fake_acp_agent.py``. Keywords in the prompt pick the behaviour:

- (none)     a plain three-chunk reply, usage, ``end_turn``
- THINK      thought chunks before the reply
- SLOW       100 chunks 0.05 s apart; ``session/cancel`` ends it with ``cancelled``
- STUBBORN   like SLOW but ignores cancel (the client must kill it)
- TOOL       plan, tool_call, permission, fs read of README.md, updates to ``completed``;
             a reject ends the tool ``failed``; a cancel ends the turn ``cancelled``
- EARLYPERM  the permission request arrives before its tool_call (codex does this)
- GHOSTCALL  a tool_call_update for an id never announced, straight to completed
- DANGLING   a tool call left in_progress when the turn ends
- WRITE      fs write of out.txt;   OUTSIDE  fs read of a path outside the cwd
- SHCMD …    (the prompt's start) runs the rest of the prompt with ``/bin/sh -c`` as an
             ``execute`` tool, for real, in the agent's folder: ``failed`` with its output
             when it exits non-zero, then the reply (no other keyword is read)
- BADUPDATE  a usage_update with ``used: null`` (fails the SDK schema), then a reply
- STDERR     2 MB on stderr before the reply (an unread PIPE would hang)
- CRASH      one chunk, a line on stderr, then ``os._exit(3)`` mid-turn
- EXITLATER  a reply, then the process exits 0.3 s after the turn
- FAIL       a JSON-RPC error;  REFUSE / MAXTOKENS  those stop reasons
- MODELDOWN  a line on stderr, then codex's error for an unreachable model server
- ESCAPES    a reply full of terminal control sequences (OSC 52 clipboard, title, OSC 8, clear)
- BADUTF8    a reply chunk whose line holds invalid UTF-8 bytes, then a plain one
- CHATTY N   N MB of stderr lines during the turn, then the reply
- HUGE N     one reply chunk of N MB in one line, then the reply
- HUGEOUT N a tool whose output is N MB in one line, then the reply
- LEAK       prints the values of the variables named in ``FAKE_ACP_LEAK`` to stderr and in
             a traceback, says them, then fails the turn with them in the error message
- LEAKCRASH  prints them to stderr, then ``os._exit(3)``
- LEAKHANG   prints and says them, then waits (a draft holding them) until cancelled
- LEAKTOOL   puts every text of ``FAKE_ACP_SHAPES`` (a file: a JSON list of [text, the secret
             in it]) and the ``FAKE_ACP_LEAK`` values everywhere an agent can: the session
             title, a plan, thoughts, a tool's title, input and output, a permission's
             title (answer it: a refusal leaves a tool row titled with it), stderr (also a
             line longer than the stderr log's pieces, cut inside a URL's password), and
             replies streamed with a secret split across two and three chunks

Chaos faults (tests/chaos) are whole prompts ``CHAOS <name> [seconds]``, checked before
any keyword above; each ends with ``cancelled`` on ``session/cancel`` unless noted:

- hang                   no update at all (the model hangs before its first token)
- dead-send              not even the prompt echo, and cancel is ignored (kill it)
- usage-flood            a tool call runs, then only ``usage_update`` every 0.1 s
- long-tool S            a tool runs S seconds in silence, completes, a reply, ``end_turn``
- tool-hang              a tool call starts and never finishes
- hang-after-final-tool  text, a tool that completes, the final reply, then silence
- permission-loss        five tools: denied, ok, denied, ok, denied (3 of 5), then silence
- flood R S [KIND [N]]   R×S updates, R a second at most (in bursts every 10 ms; longer when
                         the engine reads slower), then ``end_turn`` (ends early on cancel):
                         an agent that floods the engine.
                         KIND ``text`` (default): reply chunks ``flood 1 ``… (padded to N
                         bytes when N is given); ``stamp``: reply chunks
                         ``<seq@time.monotonic()>`` (bench/_engine_service.TOKEN: the delay to
                         each reader); ``progress``: a tool call whose output (N bytes) is
                         replaced at each update (nothing grows in the engine); ``tools``: a
                         new completed tool call (a history row of N bytes) every update

Environment: ``FAKE_ACP_STATE`` (folder of one JSON history file per session, for
``session/load`` and ``session/resume`` after a restart; each open appends what it was
handed in ``mcpServers`` to ``mcp-servers.jsonl`` there, as the wire had it), ``FAKE_ACP_CAPS`` (comma list
of ``load``, ``resume``; default both), ``FAKE_ACP_HANG_INIT`` (``initialize`` never
answers), ``FAKE_ACP_LEAK`` (see LEAK), ``FAKE_ACP_SHAPES`` (see LEAKTOOL).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pydantic
from pydantic._internal import _fields as _pydantic_fields

# Every test that starts this agent waits for its start-up, and most of that is the SDK
# building its ~280 pydantic models at import (1-2 s a process on a busy CI core). Two
# things make it cheap without changing a byte on the wire: ``defer_build`` builds a
# model's validator when it is first used (this agent uses a few dozen), and the schema's
# ``use_attribute_docstrings`` reads each class's source with ``inspect`` to fill field
# descriptions nothing here reads. The second is pydantic's private hook: when a new
# pydantic moves it, the agent only starts slower again.
pydantic.BaseModel.model_config["defer_build"] = True
if hasattr(_pydantic_fields, "extract_docstrings_from_cls"):
    _pydantic_fields.extract_docstrings_from_cls = lambda cls, use_inspect=False: {}

# After the two switches above, which only apply to models built after them.

from acp import PROTOCOL_VERSION, RequestError, run_agent  # noqa: E402
from acp.helpers import (  # noqa: E402
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (  # noqa: E402
    AgentCapabilities,
    AllowedOutcome,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionResumeCapabilities,
    ToolCallUpdate,
    UsageUpdate,
)

DENIAL = "Permission denied and could not request permission from user"
OPTIONS = [
    PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
    PermissionOption(option_id="always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


class FakeAgent:
    """Implements the agent side of the protocol with scripted turns."""

    def __init__(self) -> None:
        self._conn: Any = None
        self._cancelled: dict[str, asyncio.Event] = {}
        self._cwd: dict[str, str] = {}
        state = os.environ.get("FAKE_ACP_STATE")
        self._state = Path(state) if state else None
        caps = os.environ.get("FAKE_ACP_CAPS", "load,resume")
        self._caps = {c.strip() for c in caps.split(",") if c.strip()}

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    # ---------------------------------------------------------------- lifecycle
    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        if os.environ.get("FAKE_ACP_HANG_INIT"):
            await asyncio.Event().wait()  # a wedged agent: only a kill ends this
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session="load" in self._caps,
                session_capabilities=SessionCapabilities(
                    resume=SessionResumeCapabilities() if "resume" in self._caps else None
                ),
            ),
            agent_info=Implementation(name="fake-acp-agent", version="1.0"),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        session_id = f"fake-{uuid.uuid4().hex[:12]}"
        self._handed("session/new", mcp_servers)
        self._cwd[session_id] = cwd
        self._save(session_id, [])
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        updates = self._history(session_id)
        self._handed("session/load", mcp_servers)
        self._cwd[session_id] = cwd
        for update in updates:
            await self._raw_update(session_id, update)
        return LoadSessionResponse()

    async def resume_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> ResumeSessionResponse:
        self._history(session_id)  # raises when unknown
        self._handed("session/resume", mcp_servers)
        self._cwd[session_id] = cwd
        return ResumeSessionResponse()

    def _handed(self, method: str, servers: Any) -> None:
        """Keep what an open was handed in ``mcpServers`` (as the wire had it)."""
        if self._state is None:
            return
        self._state.mkdir(parents=True, exist_ok=True)
        plain = [s.model_dump(by_alias=True, exclude_none=True) for s in servers or []]
        with (self._state / "mcp-servers.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"method": method, "servers": plain}) + "\n")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self._cancelled.setdefault(session_id, asyncio.Event()).set()

    # ---------------------------------------------------------------- turns
    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = " ".join(getattr(block, "text", "") or "" for block in prompt)
        cancelled = self._cancelled[session_id] = asyncio.Event()
        if text.startswith("CHAOS "):
            return await self._chaos(session_id, text.split()[1:], cancelled)
        await self._send(session_id, update_user_message_text(text))
        sid = session_id
        if text.startswith("SHCMD "):
            return await self._shell(sid, text.removeprefix("SHCMD "))
        if "MODELDOWN" in text:  # what codex says when its model server cannot be reached
            print(
                "fake agent: error sending request for url (http://127.0.0.1:9/v1/responses)",
                file=sys.stderr,
                flush=True,
            )
            raise RequestError.internal_error(
                {
                    "message": "stream disconnected before completion: error sending "
                    "request for url (http://127.0.0.1:9/v1/responses)"
                }
            )
        if "FAIL" in text:
            raise RequestError.internal_error({"details": "scripted failure"})
        if "CRASH" in text:
            await self._say(sid, "about to crash")
            print("fake agent: panic: scripted crash in the model loop", file=sys.stderr, flush=True)
            await asyncio.sleep(0.1)
            os._exit(3)
        if "STDERR" in text:
            sys.stderr.write("x" * 2_000_000 + "\n")
            sys.stderr.flush()
        if "LEAKTOOL" in text:
            return await self._leak_everywhere(sid)
        if "LEAK" in text:
            secrets = [os.environ.get(name, "") for name in os.environ.get("FAKE_ACP_LEAK", "").split(",") if name]
            sys.stderr.write(f"config dump: {' '.join(secrets)}\n")
            try:
                raise RuntimeError(f"auth failed with key {secrets[0] if secrets else ''}")
            except RuntimeError:
                import traceback

                traceback.print_exc()
            sys.stderr.flush()
            if "LEAKCRASH" in text:
                await asyncio.sleep(0.1)
                os._exit(3)
            await self._say(sid, f"my keys are {' and '.join(secrets)}")
            if "LEAKHANG" in text:  # the reply stops mid-way: what was streamed is only a draft
                await cancelled.wait()
                return PromptResponse(stop_reason="cancelled")
            raise RequestError.internal_error({"details": f"auth failed with key {' '.join(secrets)}"})
        if "CHATTY" in text:
            words = text.split()
            megabytes = float(words[words.index("CHATTY") + 1]) if words.index("CHATTY") + 1 < len(words) else 50
            line = ("chatty agent log line " * 10 + "\n").encode()
            for _ in range(int(megabytes * 1_000_000 / len(line))):
                os.write(2, line)
        if "ESCAPES" in text:
            await self._say(
                sid,
                "clip\x1b]52;c;cm0gLXJmIH4=\x07 title\x1b]0;pwned\x07 link\x1b]8;;http://evil\x1b\\x"
                "\x1b]8;;\x1b\\ clear\x1b[2J\x1b[H done\x9b31m ",
            )
        if "HUGE" in text:
            await self._huge(sid, text)
        if "BADUTF8" in text:
            await asyncio.sleep(0.1)  # let the SDK's writer flush: the raw line must not land mid-line
            raw = (
                b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'
                + sid.encode()
                + b'","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"bytes '
                + b'\xff\xfe\xc3( kept "}}}}\n'
            )
            os.write(1, raw)
            await asyncio.sleep(0.1)
        if "BADUPDATE" in text:
            bad = {"sessionUpdate": "usage_update", "used": None, "size": 1000}
            await self._raw_update(sid, bad)
        if "THINK" in text:
            for part in ("Let me ", "think."):
                await self._send(sid, update_agent_thought_text(part))
        if "SLOW" in text or "STUBBORN" in text:
            for i in range(100 if "SLOW" in text else 600):
                if cancelled.is_set() and "STUBBORN" not in text:
                    return PromptResponse(stop_reason="cancelled")
                await self._say(sid, f"chunk {i} ")
                await asyncio.sleep(0.05)
        if "TOOL" in text or "EARLYPERM" in text:
            stop = await self._tool_turn(sid, early="EARLYPERM" in text)
            if stop:
                return PromptResponse(stop_reason=stop)
        if "GHOSTCALL" in text:
            await self._send(
                sid,
                update_tool_call(
                    "ghost-1", title="ghost", status="completed", content=[tool_content(text_block("boo"))]
                ),
            )
        if "DANGLING" in text:
            await self._send(
                sid,
                start_tool_call(
                    "dangle-1", "sleep", kind="execute", status="in_progress", raw_input={"command": "sleep 100"}
                ),
            )
        if "WRITE" in text:
            await self._conn.write_text_file(
                session_id=sid, path=str(Path(self._cwd[sid]) / "out.txt"), content="written by fake agent\n"
            )
        if "OUTSIDE" in text:
            try:
                await self._conn.read_text_file(session_id=sid, path="/etc/hostname")
                await self._say(sid, "outside read allowed")
            except RequestError as exc:
                await self._say(sid, f"outside read refused: {exc}")
        await self._say(sid, "Hello ")
        await self._say(sid, "from the ")
        await self._say(sid, "fake agent.")
        await self._send(sid, UsageUpdate(session_update="usage_update", used=123, size=1000))
        if "EXITLATER" in text:
            asyncio.get_running_loop().call_later(0.3, os._exit, 0)
        if "REFUSE" in text:
            return PromptResponse(stop_reason="refusal")
        if "MAXTOKENS" in text:
            return PromptResponse(stop_reason="max_tokens")
        return PromptResponse(stop_reason="end_turn")

    async def _shell(self, sid: str, command: str) -> PromptResponse:
        raw, call_id = {"command": command}, f"sh-{uuid.uuid4().hex[:8]}"
        await self._send(sid, start_tool_call(call_id, command, kind="execute", status="in_progress", raw_input=raw))
        proc = await asyncio.create_subprocess_shell(
            command, cwd=self._cwd[sid], stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await proc.communicate()
        status = "completed" if proc.returncode == 0 else "failed"
        content = [tool_content(text_block(out.decode(errors="replace")))]
        await self._send(sid, update_tool_call(call_id, status=status, content=content))
        await self._say(sid, f"the command exited {proc.returncode}.")
        return PromptResponse(stop_reason="end_turn")

    async def _tool_turn(self, sid: str, early: bool) -> str | None:
        call_id = "early-1" if early else "call-1"
        command = {"command": "cat README.md"}
        await self._send(sid, update_plan([plan_entry("read the readme", status="in_progress")]))
        if not early:
            await self._send(sid, start_tool_call(call_id, "bash", kind="execute", status="pending"))
            await self._send(sid, update_tool_call(call_id, status="in_progress", raw_input=command))
        response = await self._conn.request_permission(
            session_id=sid,
            options=OPTIONS,
            tool_call=ToolCallUpdate(tool_call_id=call_id, title="cat README.md", kind="execute", raw_input=command),
        )
        outcome = response.outcome
        if early:
            await self._send(
                sid, start_tool_call(call_id, "bash", kind="execute", status="in_progress", raw_input=command)
            )
        if not isinstance(outcome, AllowedOutcome):
            if self._cancelled[sid].is_set():
                return "cancelled"
            outcome = AllowedOutcome(option_id="reject", outcome="selected")
        if outcome.option_id == "reject":
            await self._send(
                sid,
                update_tool_call(
                    call_id, status="failed", content=[tool_content(text_block("The user rejected this tool call."))]
                ),
            )
            await self._say(sid, "The tool was rejected. ")
            return None
        read = await self._conn.read_text_file(session_id=sid, path=str(Path(self._cwd[sid]) / "README.md"))
        await self._send(
            sid, update_tool_call(call_id, status="in_progress", content=[tool_content(text_block("reading…"))])
        )
        await self._send(
            sid, update_tool_call(call_id, status="completed", content=[tool_content(text_block(read.content))])
        )
        await self._send(sid, update_plan([plan_entry("read the readme", status="completed")]))
        await self._say(sid, f"done: {read.content.strip()} ")
        return None

    async def _leak_everywhere(self, sid: str) -> PromptResponse:
        known = [os.environ.get(name, "") for name in os.environ.get("FAKE_ACP_LEAK", "").split(",") if name]
        pairs: list[list[str]] = json.loads(Path(os.environ["FAKE_ACP_SHAPES"]).read_text())  # [text, its secret]
        shapes = [text for text, _ in pairs]
        every = " ".join([*shapes, *known])
        url = next(s for s in shapes if "://" in s and "@" in s)
        await self._raw_update(sid, {"sessionUpdate": "session_info_update", "title": f"deploy via {url}"})
        await self._send(sid, update_plan([plan_entry(f"connect with {every}", status="in_progress")]))
        await self._send(sid, update_agent_thought_text(f"the credentials are {every}"))
        sys.stderr.write(f"connecting with {every}\n")
        at = url.index("://") + 3
        password = url.index(":", at) + 1
        cut = password + 3  # the stderr log writes a long line in pieces of MAX_LINE_BYTES
        sys.stderr.write("y" * (64_000 - cut) + url + " end of a long line " + "z" * 4000 + "\n")  # > a pipe read
        sys.stderr.flush()
        await self._send(
            sid,
            start_tool_call(
                "leak-1",
                f"show env {every}",
                kind="execute",
                status="in_progress",
                raw_input={"command": f"env; {every}"},
            ),
        )
        await self._send(
            sid,
            update_tool_call(
                "leak-1",
                title=f"printed {every}",
                status="completed",
                content=[tool_content(text_block(f"output:\n{every}\n"))],
                raw_output={"stdout": every},
            ),
        )
        await self._conn.request_permission(
            session_id=sid,
            options=OPTIONS,
            tool_call=ToolCallUpdate(
                tool_call_id="leak-2", title=f"psql {every}", kind="execute", raw_input={"command": f"psql {url}"}
            ),
        )
        for text, secret in [*pairs, *((k, k) for k in known)]:  # each secret cut in two, then in three
            at, size = text.index(secret), len(secret)
            for cuts in ((at + size // 2,), (at + size // 3, at + 2 * size // 3)):
                bounds = [0, *cuts, len(text)]
                pieces = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
                pieces[0], pieces[-1] = "use " + pieces[0], pieces[-1] + " now. "
                for piece in pieces:
                    await self._say(sid, piece)
        return PromptResponse(stop_reason="end_turn")

    # ---------------------------------------------------------------- chaos
    async def _chaos(self, sid: str, words: list[str], cancelled: asyncio.Event) -> PromptResponse:
        name = words[0] if words else "hang"
        seconds = float(words[1]) if len(words) > 1 else 5.0
        if name == "dead-send":
            await asyncio.Event().wait()  # swallowed; only a kill ends this
        await self._send(sid, update_user_message_text(" ".join(["CHAOS", *words])))
        if name == "usage-flood":
            await self._chaos_tool(sid, "flood-1", "make all")
            used = 0
            while not cancelled.is_set():
                used += 1
                await self._send(sid, UsageUpdate(session_update="usage_update", used=100 + used, size=128000))
                await asyncio.sleep(0.1)
            return PromptResponse(stop_reason="cancelled")
        if name == "flood":
            return await self._flood(sid, words[1:], cancelled)
        if name == "long-tool":
            await self._chaos_tool(sid, "long-1", "make all")
            await asyncio.sleep(seconds)
            await self._send(
                sid, update_tool_call("long-1", status="completed", content=[tool_content(text_block("build ok"))])
            )
            await self._say(sid, "The build passed.")
            return PromptResponse(stop_reason="end_turn")
        if name == "tool-hang":
            await self._chaos_tool(sid, "hung-1", "sleep inf")
        elif name == "hang-after-final-tool":
            await self._say(sid, "Filing the issue. ")
            await self._chaos_tool(sid, "file-1", "gh issue create")
            await self._send(
                sid,
                update_tool_call(
                    "file-1", status="completed", content=[tool_content(text_block("Issue filed successfully"))]
                ),
            )
            await self._say(sid, "Issue filed successfully.")
        elif name == "permission-loss":
            for i, denied in enumerate((True, False, True, False, True)):
                call_id = f"perm-{i}"
                await self._chaos_tool(sid, call_id, "git status" if denied else "echo ok")
                result = DENIAL if denied else "ok"
                await self._send(
                    sid,
                    update_tool_call(
                        call_id, status="failed" if denied else "completed", content=[tool_content(text_block(result))]
                    ),
                )
        await cancelled.wait()
        return PromptResponse(stop_reason="cancelled")

    async def _flood(self, sid: str, words: list[str], cancelled: asyncio.Event) -> PromptResponse:
        """``rate`` × ``seconds`` updates, ``rate`` a second at most, paced against the clock in
        10 ms bursts (a slow reader backs the pipe up: the agent then waits, as a real one does)."""
        rate, seconds = float(words[0]) if words else 3000.0, float(words[1]) if len(words) > 1 else 5.0
        kind, size = words[2] if len(words) > 2 else "text", int(words[3]) if len(words) > 3 else 0
        if kind == "progress":
            await self._chaos_tool(sid, "flood-1", "make all")
        loop = asyncio.get_running_loop()
        started, sent, total = loop.time(), 0, int(rate * seconds)
        while sent < total and not cancelled.is_set():
            due = min(total, int((loop.time() - started) * rate) + 1)
            while sent < due and not cancelled.is_set():
                sent += 1
                await self._raw_update(sid, _flood_update(kind, sent, size))
            await asyncio.sleep(0.01)
        return PromptResponse(stop_reason="cancelled" if cancelled.is_set() else "end_turn")

    async def _chaos_tool(self, sid: str, call_id: str, command: str) -> None:
        await self._send(
            sid, start_tool_call(call_id, "bash", kind="execute", status="in_progress", raw_input={"command": command})
        )

    # ---------------------------------------------------------------- plumbing
    async def _huge(self, sid: str, prompt: str) -> None:
        """HUGE N / HUGEOUT N: one line of N MB, written raw (not kept in the agent's history)."""
        words = prompt.split()
        tool = "HUGEOUT" in words
        at = words.index("HUGEOUT" if tool else "HUGE") + 1
        size = int(float(words[at]) * 1_000_000) if at < len(words) else 20_000_000
        if tool:
            await self._send(sid, start_tool_call("huge-1", "cat big.log", kind="read", status="in_progress"))
            head = b'"update":{"sessionUpdate":"tool_call_update","toolCallId":"huge-1","status":"completed",'
            head += b'"content":[{"type":"content","content":{"type":"text","text":"'
        else:
            head = b'"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
        await asyncio.sleep(0.1)  # the SDK's writer flushed: the raw line must not land mid-line
        start = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + sid.encode() + b'",'
        blocking = os.get_blocking(1)
        os.set_blocking(1, True)  # the SDK made stdout non-blocking: a big write would be cut
        try:
            with os.fdopen(os.dup(1), "wb", buffering=0) as out:
                out.write(start + head)
                chunk = b"0123456789abcdef" * 65536  # 1 MiB at a time: the agent itself stays small
                for left in range(size, 0, -len(chunk)):
                    out.write(chunk[: min(left, len(chunk))])
                out.write(b'"}}]}}}\n' if tool else b'"}}}}\n')
        finally:
            os.set_blocking(1, blocking)
        await asyncio.sleep(0.1)

    async def _say(self, sid: str, text: str) -> None:
        await self._send(sid, update_agent_message_text(text))

    async def _raw_update(self, sid: str, update: Any) -> None:
        """A session/update sent as raw JSON, past the SDK's schema (so a malformed one can be
        sent too). The SDK has no public raw-notification API: this is the one place that
        uses its connection's inner JSON-RPC connection."""
        await self._conn._conn.send_notification(  # noqa: SLF001
            "session/update", {"sessionId": sid, "update": update}
        )

    async def _send(self, sid: str, update: Any) -> None:
        raw = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        await self._raw_update(sid, raw)
        if raw.get("sessionUpdate") != "usage_update" and sid in self._cwd:
            self._save(sid, [*self._history(sid, missing_ok=True), raw])

    def _file(self, sid: str) -> Path | None:
        return self._state / f"{sid}.json" if self._state else None

    def _history(self, sid: str, missing_ok: bool = False) -> list[dict[str, Any]]:
        path = self._file(sid)
        if path is None or not path.exists():
            if missing_ok:
                return []
            raise RequestError.resource_not_found(f"session {sid}")
        return json.loads(path.read_text())["updates"]

    def _save(self, sid: str, updates: list[dict[str, Any]]) -> None:
        path = self._file(sid)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Whole or not at all, as a real agent keeps its sessions: a test SIGKILLs this agent
            # mid-turn, and a file cut mid-write made its next session/load fail.
            partial = path.with_name(path.name + ".part")
            partial.write_text(json.dumps({"sessionId": sid, "cwd": self._cwd.get(sid), "updates": updates}))
            os.replace(partial, path)


def _flood_update(kind: str, seq: int, size: int) -> dict[str, Any]:
    """The ``seq``-th update of a flood (see the module's ``flood``)."""
    if kind in ("progress", "tools"):
        output = [{"type": "content", "content": {"type": "text", "text": f"line {seq} ".ljust(size, ".")}}]
        if kind == "progress":
            return {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "flood-1",
                "status": "in_progress",
                "content": output,
            }
        call = {"toolCallId": f"flood-{seq}", "title": "echo", "kind": "execute", "rawInput": {"command": "echo"}}
        return {"sessionUpdate": "tool_call", **call, "status": "completed", "content": output}
    text = f"<{seq - 1:06d}@{time.monotonic():014.6f}>" if kind == "stamp" else f"flood {seq} ".ljust(size, ".")
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


def main() -> None:
    asyncio.run(run_agent(FakeAgent(), use_unstable_protocol=True))


if __name__ == "__main__":
    main()
