"""``polypilot send [--wait]`` and ``polypilot follow``: a session's turns, as they stream.

Both read the engine's stream narrowed to one session, with its agent events (the reply's
deltas in order with its history rows). One that fell behind (suspended with ctrl+z while
the session streamed) is sent a fresh snapshot by the engine: the rows it missed are read
from the history and printed, and it goes on from there, saying so. ``send --wait`` waits
for the end of the turn of *its* prompt — a prompt queued behind a running turn is
recognised when its own turn starts (its history row) — and exits with ``polypilot run``'s
codes. Agent text is printed stripped of terminal control sequences; ``--json`` lines are
strict ASCII JSON.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import AsyncIterator
from typing import Any

from polypilot_tui.commands.live import (
    EXIT_INTERRUPTED,
    EngineGone,
    Item,
    Resync,
    find_view,
    follow_session,
    run_command,
    until_signal,
)
from polypilot_tui.commands.output import EXIT_STDOUT_CLOSED, Output, say
from polypilot_tui.commands.run import EXIT_CANCELLED, EXIT_NOT_COMPLETED, EXIT_OK, exit_code, refusal_line
from polypilot_tui.config import Settings
from polypilot_tui.domain.chat import TOOL_STATUS_WORDS, ChatItem, ItemKind, TurnRecord
from polypilot_tui.domain.events import EventType
from polypilot_tui.domain.gathered import Gathered
from polypilot_tui.domain.prompt_queue import prompt_key
from polypilot_tui.domain.records import ItemAdded, ItemReplaced, TurnEnded
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.text import one_line, strip_control
from polypilot_tui.domain.turn import Outcome
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine.codec import encode
from polypilot_tui.engine.verbs import SEND, Send
from polypilot_tui.service.client import EngineClient

CAUGHT_UP = "fell behind the engine; caught up from its history"


class Render:
    """What a followed session prints: reply text as it streams, tool lines, rows; or JSON lines."""

    def __init__(self, out: Output, json_mode: bool) -> None:
        self.out = out
        self.json_mode = json_mode
        self.streamed = Gathered()
        """The reply text the deltas brought since the last reply row (joined when read: a
        string grown by ``+=`` at every delta is quadratic over a long reply)."""

    def json(self, obj: dict[str, Any]) -> None:
        self.out.line(dump_json(obj, ascii_only=True))  # every control character escaped

    def event(self, kind: str, data: dict[str, Any], tagged: bool = False) -> None:
        """An agent event: its delta, a tool line, or (JSON) the event itself."""
        text = data.get("deltaContent") if kind == EventType.MESSAGE_DELTA else None
        if isinstance(text, str):
            self.streamed.add(text)
        if self.json_mode:
            self.json({"kind": "event", "type": kind, "data": data} if tagged else {"type": kind, "data": data})
        elif isinstance(text, str):
            self.out.write(strip_control(text))
        elif kind == EventType.TOOL_START:
            arguments = strip_control(json.dumps(data.get("arguments"), ensure_ascii=False, default=str))
            self.out.line(f"[tool {strip_control(str(data.get('toolName') or ''))}] {arguments}")
        elif kind == EventType.TOOL_COMPLETE:
            self.out.line(f"[tool {'ok' if data.get('success') else 'failed'}]")

    def reply_row(self, item: ChatItem) -> None:
        """A reply's history row: print what its deltas did not bring (an agent that sent none)."""
        streamed = strip_control(self.streamed.text())
        self.streamed.take()
        if self.json_mode:
            return
        if not streamed:
            self.out.write(item.text)
        elif item.text.startswith(streamed):
            self.out.write(item.text[len(streamed) :])
        self.out.end_line()

    def row(self, index: int, item: ChatItem, live: bool, replaced: bool = False) -> None:
        """A history row (``live``: one the stream brought; its reply and tools streamed already)."""
        if self.json_mode:
            self.json({"kind": "row", "index": index, "item": encode(item), **({"replaced": True} if replaced else {})})
            return
        if item.kind is ItemKind.ASSISTANT:
            if live:
                self.reply_row(item)
            else:
                self.out.line(item.text)
        elif live and replaced and (refused := refusal_line(item)) is not None:
            self.out.line(refused)
        elif replaced or item.kind is ItemKind.REASONING or (live and item.kind is ItemKind.TOOL):
            return
        elif item.kind is ItemKind.USER:
            self.out.line("\n".join(f"> {line}" for line in item.text.split("\n")))
        elif item.kind is ItemKind.TOOL:
            detail = f" {one_line(item.tool_detail, 100)}" if item.tool_detail else ""
            status = TOOL_STATUS_WORDS.get(item.tool_status, item.tool_status)
            self.out.line(f"[tool {strip_control(item.tool_name)}] {status}{detail}")
        else:
            self.out.line(f"[{item.kind.value}] {strip_control(item.text)}")

    def resync(self, resync: Resync) -> None:
        """The command fell behind and caught up from the history: say so, print the rows it
        missed as from the history (a reply it had begun: its rest), then the reply streaming
        now from where its deltas stopped."""
        if self.json_mode:
            self.json({"kind": "resync", "reason": resync.reason})
        else:
            self.out.line(f"[{CAUGHT_UP} (turn ends meanwhile not shown)]")
        for row in resync.rows:
            self.row(row.index, row.item, live=row.item.kind is ItemKind.ASSISTANT)
        self.catch_up(resync.snapshot.streaming, tagged=True)

    def catch_up(self, streaming: str, tagged: bool = False) -> None:
        """The reply streaming now, from where the deltas this printed stopped (a delta event)."""
        streamed = self.streamed.text()
        if not streaming.startswith(streamed):  # the reply it had begun ended meanwhile (its row came)
            self.streamed.take()
            streamed = ""
        rest = streaming[len(streamed) :]
        if rest:
            self.event(EventType.MESSAGE_DELTA, {"deltaContent": rest}, tagged)

    def turn_end(self, record: TurnRecord) -> None:
        """How a turn ended, on a line of its own."""
        if self.json_mode:
            self.json(
                {
                    "kind": "turn_end",
                    "outcome": record.outcome.value,
                    "reason": record.reason,
                    "refused_permissions": list(record.refused),
                }
            )
            return
        why = "" if record.outcome is Outcome.COMPLETED else f": {one_line(record.reason, 200)}"
        self.out.line(f"[turn {record.outcome.value}{why}]")


def permission_hint(view: SessionView, key: str) -> str:
    """The sentence that says a turn waits for a permission, and the command that answers it."""
    prompt = view.pending_permission
    assert prompt is not None
    ids = " | ".join(strip_control(oid) for oid, _label, _kind in prompt.options) or "OPTION"
    return (
        f"waiting for permission: {one_line(prompt.title, 200)} — answer with "
        f"`polypilot answer {shlex.quote(key)} OPTION` (OPTION: {ids})"
    )


class TurnWaiter:
    """Folds the stream until the turn of one prompt ends; ``feed`` returns the exit code then."""

    def __init__(self, key: str, prompt: str, ahead: int, render: Render) -> None:
        self.key = key
        self.prompt_key = prompt_key(prompt)
        """How the view's queue names this prompt."""
        self.text = strip_control(prompt)
        self.ahead = ahead
        """The same text queued before this one: their turns start (and end) first."""
        self.seen = 0
        self.started = False
        self.before: TurnRecord | None = None
        """The last turn that ended before this prompt's began."""
        self.told: set[str] = set()
        self.render = render

    def feed(self, kind: str, data: Any) -> int | None:
        """One stream item; the exit code once this prompt's turn is over (or cannot come)."""
        if kind == "change":
            return self._change(data)
        if kind == "resync":
            return self._resync(data)
        if kind == "event" and self.started:
            self.render.event(*data)
        elif kind == "view":
            return self._view(data)
        elif kind == "removed":
            return self._verdict(EXIT_CANCELLED, "the session was closed")
        return None

    def _change(self, change: Any) -> int | None:
        if isinstance(change, ItemAdded) and not self.started:
            if change.item.kind is ItemKind.USER and change.item.text == self.text:
                self.seen += 1
                self.started = self.seen > self.ahead
        elif isinstance(change, ItemAdded) and change.item.kind is ItemKind.ASSISTANT:
            self.render.reply_row(change.item)
        elif isinstance(change, TurnEnded):
            if not self.started:
                self.before = change.record  # a turn ahead of this prompt
            elif change.record.outcome is not Outcome.RECOVERED:  # a recovery resends it: the turn goes on
                return self._end(change.record)
        return None

    def _view(self, view: SessionView) -> int | None:
        pending = view.pending_permission
        if self.started and pending is not None and pending.request_id not in self.told:
            self.told.add(pending.request_id)
            self._say(permission_hint(view, self.key))
        if (
            not self.started
            and not view.status.busy
            and view.queue_held
            and any(q.key == self.prompt_key for q in view.queue)
        ):
            before = self.before
            stopped = before is not None and before.outcome is Outcome.ABORTED
            why = f"{before.outcome.value}: {one_line(before.reason, 200)}" if before else "the queue is held"
            return self._verdict(
                EXIT_CANCELLED if stopped else EXIT_NOT_COMPLETED,
                f"the prompt was not sent: the turn before it ended ({why}); it stays queued, held "
                "(the dashboard's ctrl+p → Send queued sends it)",
            )
        return None

    def _resync(self, resync: Resync) -> int | None:
        """Caught up after falling behind: a turn of ours that ended meanwhile ends here, with
        the outcome the session's view tells (its TurnEnded went by unread)."""
        view = resync.snapshot.view
        self._say(CAUGHT_UP)
        for row in resync.rows:  # its prompt's row may be among them (its turn began meanwhile), its reply
            self._change(row)
        if self.started:
            self.render.catch_up(resync.snapshot.streaming)
        if self.started and not view.status.busy and view.last_outcome:
            outcome = Outcome(view.last_outcome)
            code, verdict = exit_code(outcome, strip_control(view.last_outcome_reason), (), [])
            if self.render.json_mode:
                self.render.json({"turn_end": outcome.value, "reason": view.last_outcome_reason, "exit_code": code})
            return self._verdict(code, verdict)
        return self._view(view)

    def _end(self, record: TurnRecord) -> int:
        code, verdict = exit_code(record.outcome, strip_control(record.reason), record.refused, [])
        if self.render.json_mode:
            self.render.json(
                {
                    "turn_end": record.outcome.value,
                    "reason": record.reason,
                    "refused_permissions": list(record.refused),
                    "exit_code": code,
                }
            )
        return self._verdict(code, verdict)

    def _verdict(self, code: int, verdict: str) -> int:
        self.render.out.end_line()
        if verdict:
            self._say(verdict)
        return code

    def _say(self, message: str) -> None:
        say(("\n" if self.render.out.line_open else "") + f"polypilot send: {message}", err=True)


async def cmd_send(
    settings: Settings, key: str, prompt: str, *, wait: bool, json_mode: bool, timeout: float | None
) -> int:
    """Send ``prompt`` to the session ``key`` names; print sent/queued, or (``wait``) follow its turn."""

    async def body(client: EngineClient) -> int:
        view = await find_view(client, key)
        if not wait:
            say(await client.call(SEND, Send(view.id, prompt)))
            return EXIT_OK

        def interrupted(name: str) -> int:
            say(f"\npolypilot send: {name}: stopped waiting; the turn goes on in the engine", err=True)
            return EXIT_INTERRUPTED

        return await until_signal(_send_and_wait(client, view, key, prompt, json_mode, timeout), interrupted)

    return await run_command(settings, True, body)


async def _send_and_wait(
    client: EngineClient, view: SessionView, key: str, prompt: str, json_mode: bool, timeout: float | None
) -> int:
    out = Output()
    text = prompt.strip("\n").rstrip()  # as the engine keeps it
    async with follow_session(client, view.id) as (snapshot, items):
        queued_ahead = sum(1 for q in snapshot.view.queue if q.key == prompt_key(text))
        waiter = TurnWaiter(key, text, queued_ahead, Render(out, json_mode))
        if await client.call(SEND, Send(view.id, prompt)) == "queued":
            say("polypilot send: queued: it goes out when the running turn ends", err=True)
        try:
            async with asyncio.timeout(timeout):
                async for kind, data in items:
                    code = waiter.feed(kind, data)
                    if out.closed:
                        return EXIT_STDOUT_CLOSED
                    if code is not None:
                        return code
        except TimeoutError:
            out.end_line()
            say(f"polypilot send: the turn did not end within {timeout:g} s; it goes on in the engine", err=True)
            return EXIT_NOT_COMPLETED
    raise EngineGone("the stream ended")  # pragma: no cover - the items end only by raising


async def cmd_follow(settings: Settings, key: str, json_mode: bool = False) -> int:
    """Print the session's history, then its turns live until ctrl+c (exit 0) or the engine goes (1)."""

    async def body(client: EngineClient) -> int:
        view = await find_view(client, key)
        return await until_signal(_follow(client, view, key, json_mode), lambda _name: EXIT_OK)

    return await run_command(settings, False, body)


async def _follow(client: EngineClient, view: SessionView, key: str, json_mode: bool) -> int:
    out = Output()
    render = Render(out, json_mode)
    told: set[str] = set()
    async with follow_session(client, view.id) as (snapshot, items):
        # Rows up to the snapshot's count come from the history; the stream brings the later ones.
        async for start, rows in client.history(view.id, upto=snapshot.view.history_len):
            for offset, item in enumerate(rows):
                render.row(start + offset, item, live=False)
        if snapshot.streaming:
            render.event(EventType.MESSAGE_DELTA, {"deltaContent": snapshot.streaming}, tagged=True)
        current: Item = ("view", snapshot.view)
        async for kind, data in _chain(current, items):
            if _follow_item(render, kind, data, key, told):
                return EXIT_OK
            if out.closed:
                return EXIT_STDOUT_CLOSED
    raise EngineGone("the stream ended")  # pragma: no cover - the items end only by raising


async def _chain(first: Item, rest: AsyncIterator[Item]) -> AsyncIterator[Item]:
    yield first
    async for item in rest:
        yield item


def _follow_item(render: Render, kind: str, data: Any, key: str, told: set[str]) -> bool:
    """Print one stream item; True when the session is gone."""
    if kind == "resync":
        render.resync(data)
    elif kind == "event":
        event_type, payload = data
        render.event(event_type, payload, tagged=True)
    elif kind == "change" and isinstance(data, (ItemAdded, ItemReplaced)):
        render.row(data.index, data.item, live=True, replaced=isinstance(data, ItemReplaced))
    elif kind == "change" and isinstance(data, TurnEnded):
        render.turn_end(data.record)
    elif kind == "view" and data.pending_permission is not None and data.pending_permission.request_id not in told:
        told.add(data.pending_permission.request_id)
        if render.json_mode:
            prompt = data.pending_permission
            options = [{"id": oid, "label": label} for oid, label, _kind in prompt.options]
            render.json(
                {"kind": "permission", "request_id": prompt.request_id, "title": prompt.title, "options": options}
            )
        else:
            render.out.line(f"[{permission_hint(data, key)}]")
    elif kind == "removed":
        render.json({"kind": "closed"}) if render.json_mode else render.out.line("[the session was closed]")
        return True
    return False
