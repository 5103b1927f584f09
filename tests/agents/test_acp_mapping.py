"""UpdateMapper: raw ACP session/update objects → engine events (pure, no process)."""

from __future__ import annotations

from typing import Any

import pytest

from polypilot_tui.agents.acp.mapping import UpdateMapper, raw_output_text, summarize_input, tool_content_text
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.infra.redact import REDACTOR


def mapper(replay: bool = False) -> tuple[UpdateMapper, list[AgentEvent]]:
    events: list[AgentEvent] = []
    return UpdateMapper(events.append, replay=replay), events


def chunk(text: str, kind: str = "agent_message_chunk", **extra: Any) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}, **extra}


def types(events: list[AgentEvent]) -> list[str]:
    return [e.type for e in events]


def test_partial_tool_updates_merge_by_id() -> None:
    m, ev = mapper()
    m.handle(
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "bash", "kind": "execute", "status": "pending"}
    )
    m.handle(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "in_progress",
            "rawInput": {"command": "ls -la"},
        }
    )
    m.handle({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "title": "List files"})
    m.handle(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "completed",
            "rawOutput": {"output": "a\nb\n", "exit": 0},
        }
    )
    # A pending call without input is held back until its input is known.
    assert types(ev) == ["tool.execution_start", "tool.execution_complete"]
    assert ev[0].get("detail") == "ls -la" and ev[0].get("arguments") == {"command": "ls -la"}
    done = ev[1].data
    assert done["toolName"] == "bash" and done["success"] is True and done["result"] == {"content": "a\nb\n"}
    assert m.tools["t1"]["title"] == "List files" and m.open_tools() == []


def test_failed_tool_carries_an_error_and_late_updates_are_ignored() -> None:
    m, ev = mapper()
    m.handle(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "edit",
            "status": "failed",
            "content": [{"type": "diff", "path": "/w/a.py", "newText": "x"}],
        }
    )
    m.handle({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"})
    assert types(ev) == ["tool.execution_start", "tool.execution_complete"]
    assert ev[1].get("success") is False and ev[1].get("error") == {"message": "edited /w/a.py"}


def test_text_before_a_tool_is_flushed_with_its_tool_request() -> None:
    m, ev = mapper()
    m.handle(chunk("Let me look. "))
    m.handle(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "read",
            "status": "pending",
            "rawInput": {"path": "/w/a"},
        }
    )
    message = [e for e in ev if e.type == "assistant.message"][0]
    assert message.get("content") == "Let me look. "
    assert message.get("toolRequests") == [{"toolCallId": "t1", "name": "read"}]
    m.handle(chunk("Done."))
    m.finish()
    last = [e for e in ev if e.type == "assistant.message"][-1]
    assert last.get("content") == "Done." and "toolRequests" not in last.data
    assert last.get("messageId") != message.get("messageId")


def test_agent_message_ids_split_messages() -> None:
    m, ev = mapper()
    m.handle(chunk("one", messageId="m1"))
    m.handle(chunk("two", messageId="m2"))
    m.finish()
    assert [(e.get("messageId"), e.get("content")) for e in ev if e.type == "assistant.message"] == [
        ("m1", "one"),
        ("m2", "two"),
    ]


def test_close_open_tools_marks_them_cancelled() -> None:
    m, ev = mapper()
    m.handle({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "sleep", "status": "in_progress"})
    m.close_open_tools("cancelled", status="cancelled")
    assert ev[-1].data["status"] == "cancelled" and ev[-1].data["error"] == {"message": "cancelled"}
    m.close_open_tools("again")
    assert len(ev) == 2


def test_permission_tool_info_is_kept_for_a_later_start() -> None:
    m, ev = mapper()
    state = m.note_permission_tool({"toolCallId": "early", "title": "rm x", "rawInput": {"cmd": ["rm", "x"]}})
    assert state["title"] == "rm x" and ev == []
    m.handle({"sessionUpdate": "tool_call", "toolCallId": "early", "status": "in_progress"})
    assert ev[0].get("detail") == "rm x" and ev[0].get("arguments") == {"cmd": ["rm", "x"]}


def test_usage_plan_and_pass_through() -> None:
    m, ev = mapper()
    m.handle({"sessionUpdate": "usage_update", "used": None, "size": 200000})
    m.handle({"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "high", "status": "pending"}]})
    m.handle({"sessionUpdate": "current_mode_update", "currentModeId": "code"})
    m.handle({"sessionUpdate": "session_info_update", "title": "Fix the bug"})
    m.handle({"sessionUpdate": "something_new", "x": 1})
    assert [(e.type, dict(e.data)) for e in ev] == [
        ("session.usage_info", {"tokenLimit": 200000}),
        ("plan", {"entries": [{"content": "a", "priority": "high", "status": "pending"}]}),
        ("current_mode_update", {"currentModeId": "code"}),
        ("session_info_update", {"title": "Fix the bug"}),
        ("session.title_changed", {"title": "Fix the bug"}),
        ("something_new", {"x": 1}),
    ]
    assert ev[0].is_usage


def test_malformed_updates_are_skipped() -> None:
    m, ev = mapper()
    m.handle({"sessionUpdate": "tool_call_update"})
    m.handle({"sessionUpdate": "agent_message_chunk", "content": "not a block"})
    m.handle({"sessionUpdate": "plan", "entries": None})
    assert types(ev) == ["plan"]


def test_live_user_chunks_are_ignored() -> None:
    m, ev = mapper()
    m.handle(chunk("hi", kind="user_message_chunk"))
    assert ev == []


def test_replay_folds_a_conversation_into_history() -> None:
    m, ev = mapper(replay=True)
    for update in (
        chunk("fix ", kind="user_message_chunk"),
        chunk("it", kind="user_message_chunk"),
        chunk("hmm", kind="agent_thought_chunk"),
        chunk("Sure. "),
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "bash", "status": "pending"},
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "ok"}}],
        },
        chunk("Fixed."),
        {"sessionUpdate": "usage_update", "used": 5, "size": 10},
        {"sessionUpdate": "available_commands_update", "availableCommands": []},
        chunk("next", kind="user_message_chunk"),
        {"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "sleep", "status": "in_progress"},
    ):
        m.handle(update)
    m.finish()
    m.close_open_tools("interrupted")
    assert [(e.type, e.get("content")) for e in ev] == [
        ("user.message", "fix it"),
        ("assistant.reasoning", "hmm"),
        ("assistant.message", "Sure. "),
        ("tool.execution_start", None),
        ("tool.execution_complete", None),
        ("assistant.message", "Fixed."),
        ("user.message", "next"),
        ("tool.execution_start", None),
        ("tool.execution_complete", None),
    ]
    assert ev[-1].get("success") is False


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (None, ""),
        ("plain", "plain"),
        ({"formatted_output": "out"}, "out"),
        ({"exit": 1}, '{"exit": 1}'),
    ],
)
def test_raw_output_text(raw: Any, text: str) -> None:
    assert raw_output_text(raw) == text


def test_summaries() -> None:
    assert summarize_input({"cmd": ["bash", "-lc", "ls"]}) == "bash -lc ls"
    assert summarize_input({"filePath": "/a"}) == "/a"
    assert summarize_input({"other": 1}) == '{"other": 1}'
    assert (
        tool_content_text(
            [{"type": "terminal", "terminalId": "x"}, {"type": "content", "content": {"type": "image", "data": ""}}]
        )
        == "[terminal x]\n[image]"
    )


def test_opencode_fills_the_command_in_after_the_start() -> None:
    m, ev = mapper()
    m.handle(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c2",
            "title": "bash",
            "kind": "execute",
            "status": "pending",
            "rawInput": {"cwd": "/ws"},
        }
    )
    update = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c2",
        "status": "in_progress",
        "title": "echo hi",
        "rawInput": {"command": "echo hi", "description": "Run a shell command"},
    }
    assert ev == []  # nothing to show yet: held back until the command is known
    m.handle(update)
    m.handle(update)  # opencode repeats it after the permission: no progress row
    assert len(ev) == 1 and ev[0].get("detail") == "echo hi" and ev[0].get("toolName") == "bash"
    assert ev[0].get("arguments") == {"command": "echo hi", "description": "Run a shell command"}


def test_changed_input_after_the_start_is_progress() -> None:
    m, ev = mapper()
    m.handle({"sessionUpdate": "tool_call", "toolCallId": "t", "title": "bash", "rawInput": {"command": "ls"}})
    m.handle({"sessionUpdate": "tool_call_update", "toolCallId": "t", "rawInput": {"command": "ls -la"}})
    assert [(e.type, e.get("progressMessage")) for e in ev] == [
        ("tool.execution_start", None),
        ("tool.execution_progress", "ls -la"),
    ]


def test_a_permission_requests_content_is_not_taken_for_the_tools_output() -> None:
    """codex asks with content describing the request; its completion has only rawOutput.
    Under load the row showed the question, not what the command printed."""
    m, ev = mapper()
    m.handle({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "bash", "rawInput": {"command": "echo x"}})
    asked = {"type": "content", "content": {"type": "text", "text": "Proposed Amendment: /bin/bash -lc echo x"}}
    state = m.note_permission_tool({"toolCallId": "t1", "title": "bash", "content": [asked]})
    assert tool_content_text(state["content"]) == "Proposed Amendment: /bin/bash -lc echo x"  # for the prompt
    m.handle(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "completed",
            "rawOutput": {"formatted_output": "x\nProcess exited with code 0"},
        }
    )
    assert ev[-1].data["result"] == {"content": "x\nProcess exited with code 0"}


def test_a_summary_cut_through_a_secret_marks_the_cut_so_no_piece_of_it_is_kept() -> None:
    """A tool's input is cut to a summary before anything redacts it: the cut says "…", the
    redactor reads it as a cut and removes the start of the password it went through."""
    password = "Zr8-" + "k3Lm" * 5
    command = f"psql postgres://app:{password}@db/x -c 'select 1'"
    at = command.index(password)
    for limit in range(at + 3, at + len(password)):
        summary = summarize_input({"command": command}, limit)
        assert summary.endswith("…") and len(summary) == limit
        shown = REDACTOR.text(summary)
        assert password[:3] not in shown, (limit, shown)


@pytest.mark.expect_errors(r"could not map ACP update 'agent_message_chunk'\nRuntimeError: a bug while mapping")
def test_a_bug_while_mapping_an_update_is_logged_in_full_and_the_next_update_is_mapped() -> None:
    events: list[AgentEvent] = []
    failed: list[str] = []

    def buggy_once(event: AgentEvent) -> None:  # stands in for a bug anywhere on the mapping's path
        if not failed:
            failed.append(event.type)
            raise RuntimeError("a bug while mapping")
        events.append(event)

    m = UpdateMapper(buggy_once)
    m.handle(chunk("lost to the bug "))
    m.handle(chunk("still here"))
    m.finish()
    assert "still here" in "".join(e.text("deltaContent") + e.text("content") for e in events)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        # the Copilot CLI over ACP: its shell "completed", the exit code in a shell_exit part
        (
            {
                "content": "x\n<shellId: 2 completed with exit code 1>",
                "contents": [{"type": "shell_exit", "exitCode": 1}],
            },
            1,
        ),
        ({"output": "x", "exit_code": 2}, 2),  # codex
        ({"output": "x", "exitCode": 127}, 127),
        ({"contents": [{"type": "shell_exit", "exitCode": 0}]}, 0),
        ({"output": "x", "exit": 3}, None),  # no key it is known by
        ({"exitCode": True}, None),
        ("plain text", None),
    ],
)
def test_a_shell_tools_exit_code_reaches_the_engine(raw: Any, code: int | None) -> None:
    """The reducer reads a non-zero exit of a tool that "completed" as a failure (and a
    sandbox's refusal then); an ACP agent says it only in its ``rawOutput``."""
    m, ev = mapper()
    m.handle(
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "bash", "kind": "execute", "status": "pending"}
    )
    m.handle({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "rawOutput": raw})
    assert ev[-1].type == "tool.execution_complete" and ev[-1].get("exitCode") == code
