"""Bad input never crashes the engine or freezes the loop.

Traces, agent logs (events.jsonl), agent events and the agents file can all be broken,
huge, hostile or out of order. Each case must end in a clear error or a skip, and every
operation is bounded in time. (The event-log reader's own edge cases live in
test_eventlog.py; the UI's escaping of markup at render time in tests/ui.)
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.agents.base import NullBackend
from polypilot_tui.cli import main
from polypilot_tui.config import AgentCatalog, AgentConfig, AgentsFileError, Settings, load_agents
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.limits import ROW_CHARS, cut_note
from polypilot_tui.domain.text import strip_control
from polypilot_tui.domain.trace import TraceError, parse_trace
from polypilot_tui.domain.view import make_view
from polypilot_tui.engine.manager import SessionManager
from tests.support.engine import Harness

MIB = 1024 * 1024
#: Whatever the input, one operation takes less than this (a frozen loop fails the test).
BOUND = 30.0
"""A hang guard, not a performance target (those live in bench/): CI boxes are loaded."""
#: What a terminal would act on: C0 controls but tab/newline, DEL, C1 controls.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@contextmanager
def bounded(seconds: float = BOUND) -> Iterator[None]:
    start = time.perf_counter()
    yield
    took = time.perf_counter() - start
    assert took < seconds, f"took {took:.2f} s (bound {seconds} s)"


# ---- traces (polypilot replay) ------------------------------------------------------------
def _replay(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes) -> tuple[int, str, str]:
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(content.encode() if isinstance(content, str) else content)
    with bounded():
        code = main(["replay", str(trace)])
    out, err = capsys.readouterr()
    return code, out, err


SEND = '{"at": 0, "send": "hello"}\n'


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[" * 100_000, "line 2: nested deeper than 64 levels"),
        ('{"at": ' + "1" * 5000 + ', "send": "x"}', "line 2: 'at' must be"),
        ('{"at": ' + "9" * 4000 + ', "send": "x"}', "line 2: 'at' must be"),
        ('{"at": 1' + "0" * 30 + ', "send": "x"}', "line 2: 'at' must be a number of seconds from 0 to"),
        ('{"at": NaN, "send": "x"}', "line 2: 'at' must be"),
        ('{"at": Infinity, "send": "x"}', "line 2: 'at' must be"),
        ('{"at": 1e400, "send": "x"}', "line 2: 'at' must be"),
        ('{"at": true, "send": "x"}', "line 2: 'at' must be"),
        ('{"at": 1, "send": "x\u0000"}', "line 2: not valid JSON"),
        ('{"at": 1, "event": {"type": "x", "data": [1]}}', "line 2: event 'data' must be an object"),
        ('{"at": 1, "restore": "yes"}', "line 2: 'restore' must be an object"),
        ('{"at": 1, "send": "   "}', "line 2: 'send' must be a non-empty string"),
    ],
    ids=[
        "deep-nesting",
        "huge-int",
        "4000-digit-at",
        "beyond-ten-years",
        "nan",
        "infinity",
        "overflow",
        "bool",
        "nul",
        "data-list",
        "restore-str",
        "blank-send",
    ],
)
def test_malformed_trace_lines_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    code, _, err = _replay(tmp_path, capsys, SEND + line + "\n")
    assert code == 2 and message in err, err
    assert "Traceback" not in err


def test_a_ten_mib_garbage_line_in_a_trace_is_rejected_without_echoing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _replay(tmp_path, capsys, SEND + "{" + "x" * (10 * MIB) + "\n")
    assert code == 2 and "line 2: not valid JSON" in err
    assert len(err) < 500  # the message names the line; it does not print 10 MiB back


def test_a_trace_that_is_not_utf8_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _replay(tmp_path, capsys, b'{"at": 0, "send": "\xff\xfe"}\n')
    assert code == 2 and "cannot read" in err


def test_a_ten_mib_reply_in_a_trace_replays_in_bounded_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = "word " * (2 * MIB)  # 10 MiB, one delta
    lines = [
        SEND,
        json.dumps(
            {"at": 1, "event": {"type": "assistant.message_delta", "data": {"messageId": "m", "deltaContent": big}}}
        )
        + "\n",
        json.dumps({"at": 2, "event": {"type": "session.idle", "data": {}}}) + "\n",
    ]
    code, out, err = _replay(tmp_path, capsys, "".join(lines))
    assert code == 0, err
    said = cut_note(len(big) - ROW_CHARS)  # kept up to its limit, the cut said
    assert "#1 completed" in out and f"{ROW_CHARS + len(said)} chars of replies" in out


def test_trace_parse_of_many_bad_lines_stops_at_the_first() -> None:
    lines = [SEND] + ["garbage"] * 100_000
    with bounded(), pytest.raises(TraceError, match="line 2:"):
        parse_trace(lines)


# ---- the agent's own log (events.jsonl) through a resume -----------------------------------
def _log(harness: Harness, sid: str) -> Path:
    return harness.manager.workdir(sid) / "events.jsonl"


def _line(kind: str, **data: Any) -> bytes:
    return json.dumps({"type": kind, "data": data, "id": "x", "timestamp": 0}).encode() + b"\n"


CORRUPTION = b"".join(
    [
        b"not json at all\n",
        b"\x00\x01\x02 binary \xff\xfe\n",
        b"[1, 2, 3]\n",
        b'{"data": {}}\n',
        b'{"type": 5}\n',
        b"{" * 50_000 + b"\n",
        b'{"type": "x", "data": {"n": ' + b"9" * 5000 + b"}}\r\n",
        b'{"type": "assistant.message", "data": {"content": "' + b"y" * (10 * MIB) + b'"}}\n',
    ]
)


async def test_resume_on_a_corrupt_events_log_with_a_ten_mib_line(make_harness: Callable[..., Harness]) -> None:
    harness = make_harness()
    sid = await harness.new()
    await harness.manager.send(sid, "hello there")
    await harness.until_rest(sid)
    with _log(harness, sid).open("ab") as fh:  # garbage, then a tool the agent never finished
        fh.write(
            CORRUPTION + _line(EventType.USER_MESSAGE, content="build") + _line(EventType.TOOL_START, toolCallId="t9")
        )
    with bounded():
        result = await harness.manager.reconnect(sid)
    assert result.resumed and result.interrupted_tool
    harness.actions.clear()
    await harness.manager.send(sid, "and now?")
    with bounded():
        await harness.until_rest(sid)
    assert [a for _, _, a, _ in harness.actions][:2] == ["abort", "send"]  # #393, despite the garbage
    assert harness.outcomes(sid)[-1] == ("completed", "session.idle")


async def test_a_truncated_events_log_ends_at_its_last_whole_line(make_harness: Callable[..., Harness]) -> None:
    harness = make_harness()
    sid = await harness.new()
    await harness.manager.send(sid, "hello there")
    await harness.until_rest(sid)
    with _log(harness, sid).open("ab") as fh:  # cut off while writing a tool start
        fh.write(_line(EventType.TURN_END) + b'{"type": "tool.execution_start", "data": {"toolCa')
    result = await harness.manager.reconnect(sid)
    assert result.resumed and not result.interrupted_tool and not result.lost_turn
    harness.actions.clear()
    await harness.manager.send(sid, "hello again")
    await harness.until_rest(sid)
    assert [a for _, _, a, _ in harness.actions] == ["send"]  # no abort: nothing was interrupted
    assert harness.outcomes(sid)[-1] == ("completed", "session.idle")


async def test_an_events_log_that_is_a_directory_does_not_break_the_session(
    make_harness: Callable[..., Harness],
) -> None:
    harness = make_harness()
    sid = harness.manager.add_session("demo", connect=False)
    _log(harness, sid).mkdir(parents=True)  # the demo agent cannot write its log at all
    await harness.manager.send(sid, "hello there")
    await harness.until_rest(sid)
    assert harness.outcomes(sid) == [("completed", "session.idle")]
    result = await harness.manager.reconnect(sid)
    assert result.resumed and not result.interrupted_tool


# ---- agent events through the manager -----------------------------------------------------
PushBackend = NullBackend  # the test is the agent: it pushes events into the sink


class Pushed:
    """A manager on a PushBackend in virtual time."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = FakeClock()
        self.backends: list[PushBackend] = []
        settings = Settings.read(None, state_dir=tmp_path)
        catalog = AgentCatalog({"push": AgentConfig(name="push", kind="demo")})

        def factory(agent: str, sink: Any, workdir: Path) -> PushBackend:
            self.backends.append(PushBackend(sink))
            return self.backends[-1]

        self.manager = SessionManager(settings, catalog, self.clock, backend_factory=factory, id_factory=lambda: "s")

    async def start(self, prompt: str = "go") -> None:
        await self.manager.create_session("push")
        await self.manager.send("s", prompt)

    async def push(self, *events: tuple[str, dict[str, Any]]) -> None:
        with bounded():
            for kind, data in events:
                self.backends[-1].sink(AgentEvent(kind, data))
                await self.clock.settle(2)
            await self.clock.advance(0.1)

    @property
    def session(self) -> Any:
        return self.manager.session("s")

    def rows(self, kind: ItemKind) -> list[Any]:
        return [item for item in self.session.history if item.kind is kind]

    def outcomes(self) -> list[str]:
        return [t.outcome.value for t in self.session.turns]


async def test_unknown_event_types_are_ignored(tmp_path: Path) -> None:
    pushed = Pushed(tmp_path)
    await pushed.start()
    await pushed.push(
        (EventType.TURN_START, {}),
        ("session.some_future_event", {"x": 1}),
        ("", {}),
        ("tool.", {}),
        ("assistant.unknown_kind", {"content": "boo"}),
        ("\x1b[2J", {}),
        (EventType.MESSAGE_DELTA, {"messageId": "m", "deltaContent": "fine"}),
        (EventType.SESSION_IDLE, {}),
    )
    assert pushed.outcomes() == ["completed"]
    assert [i.text for i in pushed.session.history] == ["go", "fine"]


async def test_events_for_unknown_tool_ids(tmp_path: Path) -> None:
    pushed = Pushed(tmp_path)
    await pushed.start()
    await pushed.push(
        (EventType.TURN_START, {}),
        (EventType.TOOL_PROGRESS, {"toolCallId": "ghost-0", "progressMessage": "ignored"}),
        (
            EventType.TOOL_COMPLETE,
            {"toolCallId": "ghost-1", "toolName": "bash", "success": True, "result": {"content": "out"}},
        ),
        (EventType.TOOL_COMPLETE, {"success": False, "error": {"message": "no id"}}),
        (EventType.PERMISSION_REQUESTED, {"requestId": "r1", "toolCallId": "ghost-2", "title": "rm"}),
    )
    tools = pushed.rows(ItemKind.TOOL)
    assert [(t.tool_call_id, t.tool_status, t.text) for t in tools] == [
        ("ghost-1", "completed", "out"),
        ("tool-2", "failed", "no id"),
    ]
    view = make_view(pushed.session)
    assert view.pending_permission is not None and view.pending_permission.tool_call_id == "ghost-2"
    await pushed.push((EventType.PERMISSION_COMPLETED, {"requestId": "r1"}), (EventType.SESSION_IDLE, {}))
    assert pushed.outcomes() == ["completed"]


async def test_out_of_order_and_duplicated_events(tmp_path: Path) -> None:
    pushed = Pushed(tmp_path)
    await pushed.start()
    complete = (
        EventType.TOOL_COMPLETE,
        {"toolCallId": "t1", "toolName": "bash", "success": True, "result": {"content": "ok"}},
    )
    start = (EventType.TOOL_START, {"toolCallId": "t1", "toolName": "bash"})
    message = (EventType.MESSAGE, {"messageId": "m1", "content": "the answer"})
    await pushed.push(
        (EventType.TURN_END, {}),
        (EventType.TURN_START, {}),
        complete,
        start,
        start,
        complete,
        (EventType.MESSAGE_DELTA, {"messageId": "m1", "deltaContent": "the answer"}),
        message,
        message,
        (EventType.TURN_START, {}),
        (EventType.TURN_START, {}),
    )
    turn = pushed.session.turn
    assert turn is not None and not turn.active_tools and turn.tool_call_count == 1  # a late start is no new tool
    await pushed.push(
        (EventType.SESSION_IDLE, {}),
        (EventType.SESSION_IDLE, {}),
        (EventType.MESSAGE_DELTA, {"messageId": "m2", "deltaContent": "late"}),
    )
    assert pushed.outcomes() == ["completed"]
    assert [(t.tool_call_id, t.tool_status) for t in pushed.rows(ItemKind.TOOL)] == [("t1", "completed")]
    assert [r.text for r in pushed.rows(ItemKind.ASSISTANT)] == ["the answer"]
    await pushed.manager.send("s", "next")
    await pushed.push(
        (EventType.MESSAGE_DELTA, {"messageId": "m3", "deltaContent": "fresh"}), (EventType.SESSION_IDLE, {})
    )
    assert [r.text for r in pushed.rows(ItemKind.ASSISTANT)] == ["the answer", "fresh"]  # "late" went nowhere


async def test_odd_data_types_do_not_break_a_turn(tmp_path: Path) -> None:
    pushed = Pushed(tmp_path)
    await pushed.start()
    await pushed.push(
        (EventType.TURN_START, {"turnId": ["x"]}),
        (EventType.MESSAGE_DELTA, {"messageId": 7, "deltaContent": 123}),
        (EventType.MESSAGE, {"messageId": None, "content": {"a": 1}, "toolRequests": "yes"}),
        (EventType.TOOL_START, {"toolCallId": 7, "toolName": None, "arguments": [1, 2]}),
        (EventType.TOOL_PROGRESS, {"toolCallId": None, "progressMessage": 5}),
        (EventType.TOOL_COMPLETE, {"toolCallId": 7, "success": "no", "error": 5, "result": [1]}),
        (EventType.PERMISSION_REQUESTED, {"requestId": None, "options": "abc"}),
        (EventType.PLAN, {"entries": 5}),
        (EventType.PLAN, {"entries": [1, {"content": None}]}),
        (EventType.SESSION_TITLE_CHANGED, {"title": ["t"]}),
        (EventType.SESSION_USAGE_INFO, {"currentTokens": "many", "tokenLimit": None}),
        (EventType.INTENT, {"intent": 3}),
        (EventType.SESSION_IDLE, {"aborted": None}),
    )
    assert pushed.outcomes() == ["completed"]
    make_view(pushed.session)  # the view builds too


# ---- hostile text: terminal escapes are stripped, markup is kept literally -----------------
HOSTILE = (
    "\x1b[31mred\x1b[0m \x1b[2J\x1b[H\x1b[?1049h cursor "  # CSI: colour, clear screen, alt screen
    "\x1b]8;;https://evil.example\x07link\x1b]8;;\x07 "  # OSC 8 hyperlink (BEL-terminated)
    "\x1b]8;;https://evil.example\x1b\\st-link\x1b]8;;\x1b\\ "  # OSC 8 (ST-terminated)
    "\x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;pwned title\x07 "  # OSC 52 clipboard write, OSC 0 title
    "\x1bPq#0;2;0;0;0\x1b\\ "  # DCS (sixel)
    "bell\x07 nul\x00 bs\x08 del\x7f "  # C0 and DEL
    "\x9b31mc1csi \x85nel \x9d8;;x\x9c "  # C1 (8-bit CSI, NEL, OSC/ST)
    "[bold red]x[/] [link=https://evil.example]click[/link] [/]"  # Rich markup: kept, escaped at render
)


def _assert_clean(text: str) -> None:
    assert not CONTROL.search(text), repr(text)
    assert "pwned title" not in text and "cm0gLXJmIH4=" not in text and "https://evil.example\x07" not in text


async def test_escape_sequences_are_stripped_everywhere_and_markup_is_kept_literally(tmp_path: Path) -> None:
    pushed = Pushed(tmp_path)
    await pushed.start(prompt=HOSTILE)
    await pushed.push(
        (EventType.TURN_START, {}),
        (EventType.SESSION_TITLE_CHANGED, {"title": HOSTILE}),
        (EventType.INTENT, {"intent": HOSTILE}),
        (EventType.PLAN, {"entries": [{"content": HOSTILE, "status": "pending"}]}),
        (EventType.REASONING_DELTA, {"reasoningId": "r", "deltaContent": HOSTILE}),
        (EventType.MESSAGE_DELTA, {"messageId": "m", "deltaContent": HOSTILE}),
        (EventType.TOOL_START, {"toolCallId": "t1", "toolName": "bash", "arguments": {"command": HOSTILE}}),
        (EventType.TOOL_PROGRESS, {"toolCallId": "t1", "progressMessage": HOSTILE}),
        (EventType.TOOL_COMPLETE, {"toolCallId": "t1", "success": True, "result": {"content": HOSTILE}}),
        (EventType.TOOL_START, {"toolCallId": "t2", "toolName": "bash"}),
        (EventType.TOOL_COMPLETE, {"toolCallId": "t2", "success": False, "error": {"message": HOSTILE}}),
        (
            EventType.PERMISSION_REQUESTED,
            {
                "requestId": "r1",
                "title": HOSTILE,
                "detail": HOSTILE,
                "options": [{"optionId": "allow", "name": HOSTILE, "kind": "allow_once"}],
            },
        ),
    )
    view = make_view(pushed.session)
    prompt = view.pending_permission
    assert prompt is not None
    for text in (
        view.title,
        view.intent,
        prompt.title,
        prompt.detail,
        *(o[1] for o in prompt.options),
        *(entry[0] for entry in pushed.session.plan),
    ):
        _assert_clean(text)
    await pushed.push(
        (EventType.PERMISSION_COMPLETED, {"requestId": "r1"}), (EventType.SESSION_ERROR, {"message": HOSTILE})
    )
    assert pushed.outcomes() == ["failed"]
    for item in pushed.session.history:
        _assert_clean(item.text)
        _assert_clean(item.tool_detail)
    kinds = {item.kind for item in pushed.session.history}
    assert {ItemKind.USER, ItemKind.ASSISTANT, ItemKind.REASONING, ItemKind.TOOL, ItemKind.ERROR} <= kinds
    reply = next(i.text for i in pushed.session.history if i.kind is ItemKind.ASSISTANT)
    assert "[bold red]x[/]" in reply and "[link=https://evil.example]click[/link]" in reply
    assert reply.startswith("red  cursor link st-link ")  # the visible text stays
    _assert_clean(make_view(pushed.session).reason)


@pytest.mark.parametrize(
    "text",
    [
        "\x1b[" * (5 * MIB),
        "\x1b[" + "0;" * (5 * MIB),
        "\x1b]" + "x" * (10 * MIB),
        "\x1bP" + "\x1b" * (10 * MIB),
        "\x9b" * (10 * MIB),
        ("\x1b[1m" + "[b]" * 10) * (MIB // 10),
        "\r\n" * (5 * MIB),
    ],
    ids=["csi-starts", "csi-unterminated", "osc-unterminated", "dcs-escapes", "c1-csi", "mixed", "crlf"],
)
def test_stripping_pathological_text_is_linear(text: str) -> None:
    with bounded():
        out = strip_control(text)
    assert not CONTROL.search(out)


# ---- the agents file --------------------------------------------------------------------
def _agents(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "agents.toml"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ('[good]\nkind = "demo"\n\n[bad\nkind = "acp"\n', "line 4"),
        ('[a]\nkind = "demo"\nkind = "acp"\n', "line 3"),
        ("[a]\nkind = demo\n", "line 2"),
        ('[a]\nargs = ["x",\n', "at end of document"),
    ],
    ids=["unclosed-table", "duplicate-key", "bare-value", "unclosed-array"],
)
def test_broken_toml_names_the_file_and_line(tmp_path: Path, content: str, line: str) -> None:
    path = _agents(tmp_path, content)
    with pytest.raises(AgentsFileError) as info:
        load_agents(path)
    message = str(info.value)
    assert str(path) in message and line in message and "not valid TOML" in message


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\xff\xfe[a]\n", "cannot be read"),
        (None, "cannot be read"),  # a directory
    ],
)
def test_an_unreadable_agents_file_is_a_clear_error(tmp_path: Path, content: bytes | None, why: str) -> None:
    if content is None:
        path = tmp_path / "agents.toml"
        path.mkdir()
    else:
        path = _agents(tmp_path, content)
    with pytest.raises(AgentsFileError, match=why) as info:
        load_agents(path)
    assert str(path) in str(info.value)


def test_bad_entries_are_skipped_with_reasons_and_the_rest_loads(tmp_path: Path) -> None:
    path = _agents(
        tmp_path,
        """
top_level_value = 5

[ok]
kind = "acp"
command = "opencode"

[wrong_kind]
kind = "nonsense"

[no_kind]
command = "x"

[bad_args]
kind = "acp"
args = "not a list"

[bad_provider]
kind = "copilot"
provider = { type = "openai" }

[bad_env]
kind = "acp"
env = { A = 1 }
""",
    )
    with bounded():
        catalog = load_agents(path)
    assert catalog.names() == ["demo", "ok"]
    problems = "\n".join(catalog.problems)
    assert len(catalog.problems) == 6, problems
    for fragment in (
        "top_level_value: expected a table",
        "wrong_kind: kind:",
        "no_kind: kind: Field required",
        "bad_args: args:",
        "bad_provider: provider.base_url: Field required",
        "bad_env: env: expected str, got int",  # msgspec names the table, not its key
    ):
        assert fragment in problems, problems


def test_cli_reports_a_broken_agents_file_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _agents(tmp_path, "[a\n")
    with pytest.raises(SystemExit) as info:
        main(["--agents-file", str(path), "agents"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and str(path) in err and "line 1" in err and "Traceback" not in err


def test_run_exit_codes_say_which_way_a_turn_went() -> None:
    from polypilot_tui.commands.run import (
        EXIT_CANCELLED,
        EXIT_NOT_COMPLETED,
        EXIT_OK,
        EXIT_PERMISSION_REFUSED,
        exit_code,
    )
    from polypilot_tui.domain.turn import Outcome

    assert exit_code(Outcome.COMPLETED, "session.idle", (), []) == (EXIT_OK, "")
    code, verdict = exit_code(Outcome.COMPLETED, "session.idle", ("Run bash: rm -rf build",), [])
    assert code == EXIT_PERMISSION_REFUSED and "1 permission request was refused: Run bash: rm -rf build" in verdict
    assert exit_code(Outcome.ABORTED, "stopped by user", (), ["SIGINT"]) == (EXIT_CANCELLED, "turn cancelled by SIGINT")
    assert exit_code(Outcome.ABORTED, "the agent ended the turn as aborted", (), [])[0] == EXIT_CANCELLED
    code, verdict = exit_code(Outcome.STUCK, "no activity for 120 s (waiting for the model)", (), [])
    assert code == EXIT_NOT_COMPLETED and verdict.startswith("turn stuck: no activity")
    assert len({EXIT_OK, EXIT_NOT_COMPLETED, EXIT_PERMISSION_REFUSED, EXIT_CANCELLED, 2}) == 5
