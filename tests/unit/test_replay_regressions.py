"""Every seed regression as a trace, replayed through the real manager and watchdog."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.cli import main
from polypilot_tui.commands.replay import run_trace

TRACES = Path(__file__).parent.parent / "traces"


async def replay(name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    result = await run_trace((TRACES / name).read_text().splitlines())
    return result.timeline, result.final


def turn_ends(timeline: list[dict[str, Any]]) -> list[tuple[float, str, str]]:
    """(at, outcome, reason and technical detail) of every turn end."""
    return [
        (item["at"], item["turn_end"], item["reason"] + (f" [{item['detail']}]" if "detail" in item else ""))
        for item in timeline
        if "turn_end" in item
    ]


def actions(timeline: list[dict[str, Any]]) -> list[tuple[float, str]]:
    return [(item["at"], item["action"]) for item in timeline if "action" in item]


async def test_pr230_usage_events_never_count_as_progress() -> None:
    timeline, final = await replay("pr230_usage_flood.jsonl")
    [(at, outcome, reason)] = turn_ends(timeline)
    # Last real event (turn_start) at 1 s; usage events kept coming every 10 s until 231 s.
    assert outcome == "stuck" and at == pytest.approx(121.0, abs=1.0)
    assert "no activity for 120 s" in reason and "last event assistant.turn_start" in reason
    assert final["status"] == "stuck"


async def test_pr299_zero_idle_completes_4s_after_turn_end() -> None:
    timeline, final = await replay("pr299_zero_idle.jsonl")
    [(at, outcome, reason)] = turn_ends(timeline)
    assert outcome == "completed" and at == pytest.approx(1.4 + 4.0, abs=0.5)
    assert "no session.idle" in reason
    assert final["history_chars"] == len("Hello world")


async def test_pr332_fallback_waits_34s_when_tools_were_used() -> None:
    timeline, _ = await replay("pr332_turn_end_after_tools.jsonl")
    [(at, outcome, _)] = turn_ends(timeline)
    assert outcome == "completed" and at == pytest.approx(41 + 34, abs=0.5)


async def test_pr148_between_tool_rounds_uses_180s_not_120s() -> None:
    timeline, final = await replay("pr148_between_tool_rounds.jsonl")
    # 145 s of silence between rounds: the 120 s tier would have killed a live session.
    assert turn_ends(timeline) == [(152.5, "completed", "session.idle")]


async def test_pr211_resumed_without_events_quiesces_after_30s() -> None:
    timeline, final = await replay("pr211_resume_quiescence.jsonl")
    [(at, outcome, reason)] = turn_ends(timeline)
    assert outcome == "stuck" and at == pytest.approx(30.0, abs=1.0)
    assert "tier resume-quiescence" in reason and "after the restart" in reason


async def test_pr211_resumed_with_events_flowing_is_not_killed_at_30s() -> None:
    timeline, _ = await replay("pr211_resume_events_flow.jsonl")
    assert turn_ends(timeline) == [(27.5, "completed", "session.idle")]


async def test_pr285_denial_window_trips_with_successes_interleaved() -> None:
    timeline, final = await replay("pr285_permission_window_mixed.jsonl")
    assert final["permission_warning"] is True
    assert (9.0, "reconnect") in actions(timeline)
    assert any(item.get("status") == "recovering" for item in timeline)
    assert turn_ends(timeline)[0][1] == "recovered"
    # A tool succeeded this turn: the prompt must not be resent (#298).
    assert not any(action == "resend" for _, action in actions(timeline))


async def test_pr298_resend_only_when_no_tool_succeeded() -> None:
    timeline, final = await replay("pr298_permission_loss_resend.jsonl")
    assert [a for _, a in actions(timeline)][:3] == ["send", "reconnect", "resend"]
    assert turn_ends(timeline)[0][1] == "recovered"


async def test_pr393_interrupted_tool_is_aborted_before_the_next_send() -> None:
    timeline, _ = await replay("pr393_interrupted_tool_on_resume.jsonl")
    acts = actions(timeline)
    assert acts[:2] == [(5.0, "abort"), (5.0, "send")]
    assert turn_ends(timeline)[0][1] == "completed"


async def test_ghaw_post_completion_hang_completes_as_success() -> None:
    timeline, _ = await replay("ghaw_post_completion_hang.jsonl")
    [(at, outcome, reason)] = turn_ends(timeline)
    assert outcome == "completed" and at == pytest.approx(5 + 30, abs=0.5)
    assert "the reply was complete" in reason


async def test_a_nine_minute_tool_is_not_killed() -> None:
    timeline, _ = await replay("long_tool_not_killed.jsonl")
    assert turn_ends(timeline) == [(545.1, "completed", "session.idle")]


async def test_stop_keeps_partial_text() -> None:
    timeline, final = await replay("stop_keeps_partial_text.jsonl")
    assert turn_ends(timeline) == [(10.0, "aborted", "stopped by user")]
    assert final["history_chars"] == len("partial answer")


async def test_horizon_bounds_a_run_paused_on_a_permission() -> None:
    lines = [
        json.dumps({"at": 0, "send": "go"}),
        json.dumps({"at": 1, "event": {"type": "permission.requested", "data": {"requestId": "r1", "title": "ls"}}}),
    ]
    result = await run_trace(lines, horizon=100)
    assert result.final["status"] == "awaiting_permission"


@pytest.mark.parametrize(
    "line,message",
    [
        ("{not json", "line 2: not valid JSON"),
        ('{"at": -1, "send": "x"}', "line 2: 'at' must be"),
        ('{"at": 1}', "line 2: needs exactly one of"),
        ('{"at": 1, "send": "x", "stop": true}', "line 2: needs exactly one of"),
        ('{"at": 1, "event": {"data": {}}}', "line 2: event needs a non-empty string 'type'"),
        ("[1, 2]", "line 2: expected a JSON object"),
        ('{"at": 0.5, "send": "x"}', "line 2: 'at' goes back in time"),
    ],
)
def test_invalid_trace_gives_line_number_and_exit_2(tmp_path: Path, capsys, line: str, message: str) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"at": 1, "send": "hello"}\n' + line + "\n")
    assert main(["replay", str(trace)]) == 2
    assert message in capsys.readouterr().err


def test_replay_json_output_is_one_object_per_line(capsys) -> None:
    assert main(["replay", "--json", str(TRACES / "pr230_usage_flood.jsonl")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    objects = [json.loads(line) for line in lines]
    assert all(isinstance(o, dict) for o in objects)
    assert "final" in objects[-1] and objects[-1]["final"]["status"] == "stuck"
    assert {"at", "status", "reason"} <= set(next(o for o in objects if "status" in o))
    assert {"at", "turn_end", "reason"} <= set(next(o for o in objects if "turn_end" in o))
    assert {"at", "action"} <= set(next(o for o in objects if "action" in o))
