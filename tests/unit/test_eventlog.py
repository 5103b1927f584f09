"""Tail-reading of events.jsonl and PolyPilot's restore/resume heuristics (core/eventlog.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polypilot_tui.agents.agent_log import LogStat, read_tail, stat_log
from polypilot_tui.domain.eventlog import (
    has_interrupted_tool,
    is_still_processing,
    last_event_type,
    lost_turn,
)
from polypilot_tui.domain.safe_json import ParseError, load_json

TS = "tool.execution_start"
TC = "tool.execution_complete"
TP = "tool.execution_progress"
UM = "user.message"
T0 = "assistant.turn_start"
T1 = "assistant.turn_end"
AM = "assistant.message"
RESUME = "session.resume"
SHUTDOWN = "session.shutdown"


def ev(kind: str, **data: Any) -> dict[str, Any]:
    return {"type": kind, "data": data}


def evs(*kinds: str) -> list[dict[str, Any]]:
    return [ev(k) for k in kinds]


def line(kind: str, **data: Any) -> str:
    return json.dumps({"type": kind, "data": data, "id": "x", "timestamp": "2026-01-01T00:00:00Z", "parentId": None})


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def types(entries: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in entries]


# --- read_tail -------------------------------------------------------------------------


class TestReadTail:
    def test_missing_file(self, tmp_path: Path) -> None:
        assert read_tail(tmp_path / "nope.jsonl") == []

    def test_directory_is_not_a_log(self, tmp_path: Path) -> None:
        assert read_tail(tmp_path) == []

    @pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
    def test_no_fd_leak_on_non_regular_paths(self, tmp_path: Path) -> None:
        log = write(tmp_path / "e.jsonl", line(UM) + "\n")
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(50):
            read_tail(tmp_path)
            read_tail(log)
            read_tail(tmp_path / "missing")
        assert len(os.listdir("/proc/self/fd")) == before

    def test_read_error_and_shrinking_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        log = write(tmp_path / "e.jsonl", line(UM) + "\n" + line(T0) + "\n")

        def failing_read(fd: int, n: int) -> bytes:
            raise OSError("EIO")

        monkeypatch.setattr(os, "read", failing_read)
        assert read_tail(log) == []
        # The file was truncated between lseek(END) and read: whatever is left is parsed.
        monkeypatch.setattr(os, "read", lambda fd, n: b"")
        assert read_tail(log) == []

    def test_invalid_path(self) -> None:
        assert read_tail(Path("bad\0path")) == []
        assert stat_log(Path("bad\0path"), now_wall=0.0) is None

    def test_empty_file(self, tmp_path: Path) -> None:
        assert read_tail(write(tmp_path / "e.jsonl", "")) == []

    def test_blank_lines_only(self, tmp_path: Path) -> None:
        assert read_tail(write(tmp_path / "e.jsonl", "\n\n  \r\n\n")) == []

    def test_reads_all_in_order(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", "\n".join([line(UM, content="hi"), line(T0), line(T1)]) + "\n")
        out = read_tail(p)
        assert types(out) == [UM, T0, T1]
        assert out[0]["data"] == {"content": "hi"}

    def test_last_max_lines_oldest_first(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", "".join(line("e", i=i) + "\n" for i in range(100)))
        out = read_tail(p, max_lines=5)
        assert [e["data"]["i"] for e in out] == [95, 96, 97, 98, 99]

    @pytest.mark.parametrize(("max_lines", "max_bytes"), [(0, 100), (-1, 100), (5, 0), (5, -3)])
    def test_non_positive_budgets(self, tmp_path: Path, max_lines: int, max_bytes: int) -> None:
        p = write(tmp_path / "e.jsonl", line(UM) + "\n")
        assert read_tail(p, max_lines=max_lines, max_bytes=max_bytes) == []

    def test_partial_last_line_skipped(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", line(UM) + "\n" + line(T0) + "\n" + '{"type":"tool.exec')
        assert types(read_tail(p)) == [UM, T0]

    def test_complete_last_line_without_newline_kept(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", line(UM) + "\n" + line(T0))
        assert types(read_tail(p)) == [UM, T0]

    def test_malformed_lines_in_the_middle(self, tmp_path: Path) -> None:
        text = "\n".join(
            [
                line(UM),
                "not json",
                "{broken",
                "[1, 2, 3]",
                '"a string"',
                "42",
                "null",
                '{"data": {}}',
                '{"type": 7}',
                '{"type": ""}',
                '{"type": null}',
                "\xff\xfe garbage",
                line(T0),
                "[[[[[[" * 10000,
                line(T1),
            ]
        )
        assert types(read_tail(write(tmp_path / "e.jsonl", text))) == [UM, T0, T1]

    def test_invalid_utf8_line_skipped(self, tmp_path: Path) -> None:
        data = line(UM).encode() + b"\n" + b'{"type":"\xff\xfe"}\n' + line(T1).encode() + b"\n"
        assert types(read_tail(write(tmp_path / "e.jsonl", data))) == [UM, T1]

    def test_deep_nesting_does_not_raise(self, tmp_path: Path) -> None:
        deep = '{"type":"x","data":' + "[" * 200_000 + "]" * 200_000 + "}"
        p = write(tmp_path / "e.jsonl", line(UM) + "\n" + deep + "\n")
        out = read_tail(p, max_bytes=1 << 20)
        assert types(out)[0] == UM  # the deep line may or may not parse; nothing raises

    def test_crlf(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", line(UM) + "\r\n" + line(T0) + "\r\n" + line(T1) + "\r\n")
        assert types(read_tail(p)) == [UM, T0, T1]

    def test_crlf_across_the_tail_boundary(self, tmp_path: Path) -> None:
        body = "".join(line("e", i=i) + "\r\n" for i in range(50))
        p = write(tmp_path / "e.jsonl", body)
        size = len((line("e", i=49) + "\r\n").encode())
        # Window starts exactly after the \n of line 48: line 49 is whole and kept.
        assert [e["data"]["i"] for e in read_tail(p, max_bytes=size)] == [49]
        # One byte less: line 49 is cut, and dropped as partial.
        assert read_tail(p, max_bytes=size - 1) == []

    def test_first_partial_line_dropped_when_starting_mid_file(self, tmp_path: Path) -> None:
        first, second = line(UM, content="a" * 50), line(T0)
        p = write(tmp_path / "e.jsonl", first + "\n" + second + "\n")
        # Window covers the tail of `first` (still a JSON-looking fragment) and all of `second`.
        out = read_tail(p, max_bytes=len(second) + 1 + 20)
        assert types(out) == [T0]

    def test_window_exactly_on_line_boundary_keeps_first_line(self, tmp_path: Path) -> None:
        first, second = line(UM), line(T0)
        p = write(tmp_path / "e.jsonl", first + "\n" + second + "\n")
        assert types(read_tail(p, max_bytes=len(second) + 1)) == [T0]
        assert types(read_tail(p, max_bytes=len(first) + len(second) + 2)) == [UM, T0]

    def test_whole_window_inside_one_line(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", line(UM) + "\n" + line(AM, content="x" * 5000) + "\n")
        assert read_tail(p, max_bytes=1000) == []

    def test_ten_mib_line_is_not_read_whole(self, tmp_path: Path) -> None:
        huge = json.dumps({"type": AM, "data": {"content": "x" * (10 * 1024 * 1024)}})
        tail = [line(T1), line(UM, content="after"), line(T0)]
        p = write(tmp_path / "e.jsonl", line(UM) + "\n" + huge + "\n" + "\n".join(tail) + "\n")
        assert p.stat().st_size > 10 * 1024 * 1024
        import polypilot_tui.agents.agent_log as eventlog_module

        read_bytes = 0
        real_read = eventlog_module.os.read

        def counting_read(fd: int, size: int) -> bytes:
            nonlocal read_bytes
            data = real_read(fd, size)
            read_bytes += len(data)
            return data

        eventlog_module.os.read = counting_read  # type: ignore[assignment]
        try:
            out = read_tail(p)
        finally:
            eventlog_module.os.read = real_read  # type: ignore[assignment]
        assert types(out) == [T1, UM, T0]
        assert out[1]["data"]["content"] == "after"
        assert read_bytes <= 65536 + 1  # the byte budget (plus one probe byte), never the 10 MiB

    def test_ten_mib_last_line_gives_nothing_rather_than_reading_it(self, tmp_path: Path) -> None:
        huge = json.dumps({"type": AM, "data": {"content": "x" * (10 * 1024 * 1024)}})
        p = write(tmp_path / "e.jsonl", line(UM) + "\n" + huge + "\n")
        assert read_tail(p) == []
        assert types(read_tail(p, max_bytes=32 * 1024 * 1024)) == [UM, AM]

    def test_file_truncated_mid_line(self, tmp_path: Path) -> None:
        full = "".join(line("e", i=i) + "\n" for i in range(10))
        p = write(tmp_path / "e.jsonl", full)
        with p.open("r+b") as f:
            f.truncate(len(full.encode()) - 7)  # cut into the last line
        assert [e["data"]["i"] for e in read_tail(p)] == list(range(9))

    def test_file_truncated_to_zero(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", line(UM) + "\n")
        p.write_bytes(b"")
        assert read_tail(p) == []

    def test_max_lines_counts_only_good_entries(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", "\n".join([line(UM), line(T0), "junk", "junk", line(T1)]))
        assert types(read_tail(p, max_lines=2)) == [T0, T1]

    @pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
    def test_fifo_does_not_block(self, tmp_path: Path) -> None:
        fifo = tmp_path / "events.jsonl"
        os.mkfifo(fifo)
        assert read_tail(fifo) == []
        assert stat_log(fifo, now_wall=time.time()) is None


# --- last_event_type -----------------------------------------------------------------


def test_last_event_type() -> None:
    assert last_event_type([]) is None
    assert last_event_type(evs(UM, T0)) == T0
    # Type-less or non-dict entries passed by a caller are ignored, not fatal.
    assert last_event_type([ev(UM), {"data": {}}, {"type": 3}]) == UM  # type: ignore[list-item]
    assert last_event_type([{"type": None}]) is None


# --- is_still_processing (IsSessionStillProcessing) ----------------------------------


class TestIsStillProcessing:
    def test_no_entries(self) -> None:
        assert not is_still_processing([], 1.0)

    def test_age_unknown(self) -> None:
        assert not is_still_processing(evs(T0), None)

    def test_stale_file(self) -> None:
        assert not is_still_processing(evs(T0), 600.1)
        assert not is_still_processing(evs(T0), 10.0, stale_after=5.0)

    def test_nan_age_is_unknown(self) -> None:
        assert not is_still_processing(evs(T0), float("nan"))

    def test_exactly_at_threshold_is_not_stale(self) -> None:
        assert is_still_processing(evs(T0), 600.0)  # PolyPilot: staleness > 600 is stale

    @pytest.mark.parametrize("kind", ["session.idle", "session.error", SHUTDOWN, "session.start", "abort"])
    def test_terminal_last_types(self, kind: str) -> None:
        assert not is_still_processing(evs(UM, T0, TS, kind), 1.0)

    @pytest.mark.parametrize(
        "kind",
        [
            T0,
            TS,
            TP,
            "assistant.message_delta",
            "assistant.reasoning",
            "assistant.reasoning_delta",
            "assistant.intent",
            UM,
            TC,
            RESUME,
            "tool.execution_end",
            "something.unknown",
        ],
    )
    def test_other_last_types_are_active(self, kind: str) -> None:
        # PolyPilot's AllActiveEventTypes theory, plus "otherwise true" for anything else.
        assert is_still_processing(evs(kind), 1.0)

    def test_turn_end_without_tools(self) -> None:
        # StuckSessionRecoveryTests.IsSessionStillProcessing_TurnEndWithoutPendingTools_ReturnsFalse
        assert not is_still_processing(evs(T0, AM, T1), 1.0)

    def test_message_with_content_no_tools(self) -> None:
        # …_MessageWithContentNoTools_ReturnsFalse
        assert not is_still_processing([ev(T0), ev(AM, content="Here is your answer.")], 1.0)

    def test_turn_end_with_pending_tools(self) -> None:
        # StuckSessionRecoveryTests.IsSessionStillProcessing_TurnEndWithPendingTools_ReturnsTrue
        entries = evs(T0, AM, TS, TC, T1, T0, AM, TS, TC, T1, T0, AM, TS)
        assert is_still_processing(entries, 1.0)

    def test_turn_end_after_a_tool_round_is_between_rounds(self) -> None:
        # A sub-turn that ran tools is never the last: the model is called again with results.
        assert is_still_processing(evs(UM, T0, AM, TS, TC, T1), 1.0)
        assert is_still_processing(evs(UM, T0, AM, TS, TP, T1), 1.0)

    def test_final_sub_turn_after_tool_rounds_is_done(self) -> None:
        # Earlier sub-turns used tools, but the walk stops at the last turn_start.
        assert not is_still_processing(evs(UM, T0, AM, TS, TC, T1, T0, AM, T1), 1.0)

    def test_message_after_tools_in_same_sub_turn(self) -> None:
        assert is_still_processing(evs(T0, TS, TC, AM), 1.0)

    def test_walk_stops_at_earlier_turn_end(self) -> None:
        # Tools before a previous turn_end (no turn_start persisted in between).
        assert not is_still_processing(evs(TS, TC, T1, AM, T1), 1.0)

    @pytest.mark.parametrize("boundary", [RESUME, "session.start", UM])
    def test_walk_stops_at_other_boundaries(self, boundary: str) -> None:
        assert not is_still_processing(evs(TS, TC, boundary, AM, T1), 1.0)

    def test_walk_limited_to_30_types(self) -> None:
        # A tool event 30+ entries back (no boundary in between) is out of the window.
        filler = ["session.usage_record"] * 29
        assert not is_still_processing(evs(TS, *filler, T1), 1.0)
        assert is_still_processing(evs(TS, *filler[1:], T1), 1.0)

    def test_ignores_typeless_entries(self) -> None:
        entries = [ev(T0), ev(AM), {"data": {}}]
        assert not is_still_processing(entries, 1.0)  # last typed entry is assistant.message


# --- has_interrupted_tool (HasInterruptedToolExecution, PR #393) ----------------------


class TestHasInterruptedTool:
    def test_empty(self) -> None:
        assert not has_interrupted_tool([])

    def test_matched_pair_without_idle_is_not_interrupted(self) -> None:
        # The #393 false positive: session.idle is never on disk, so a healthy log ends here.
        assert not has_interrupted_tool(evs(UM, T0, AM, TS, TC))

    def test_start_only_sigkill(self) -> None:
        assert has_interrupted_tool(evs(UM, T0, AM, TS))

    def test_start_then_shutdown(self) -> None:
        assert has_interrupted_tool(evs(UM, T0, AM, TS, SHUTDOWN))

    def test_start_then_shutdown_then_resume(self) -> None:
        # The evidence pattern from the PR: tool start, crash, resume.
        assert has_interrupted_tool(evs(UM, T0, TS, SHUTDOWN, RESUME, RESUME))

    def test_matched_pair_with_resume_marker(self) -> None:
        assert not has_interrupted_tool(evs(UM, T0, TS, TC, RESUME))
        assert not has_interrupted_tool(evs(UM, T0, TS, TC, SHUTDOWN, RESUME))

    def test_two_starts_one_complete(self) -> None:
        assert has_interrupted_tool(evs(AM, TS, TS, TC))

    def test_interleaved_parallel_tools_all_done(self) -> None:
        assert not has_interrupted_tool(evs(AM, TS, TS, TC, TS, TC, TC))

    def test_interleaved_parallel_tools_one_lost(self) -> None:
        assert has_interrupted_tool(evs(AM, TS, TS, TS, TC, TC))
        assert has_interrupted_tool(evs(AM, TS, TS, TC, SHUTDOWN))

    def test_several_rounds_all_matched(self) -> None:
        assert not has_interrupted_tool(evs(T0, AM, TS, TC, T1, T0, AM, TS, TS, TC, TC))

    def test_stops_at_first_other_event(self) -> None:
        # The unmatched start sits before turn_end: an older, finished sub-turn.
        assert not has_interrupted_tool(evs(TS, T1, T0, AM, TS, TC))
        assert not has_interrupted_tool(evs(TS, AM))

    def test_only_control_events(self) -> None:
        assert not has_interrupted_tool(evs(SHUTDOWN, RESUME))
        assert not has_interrupted_tool(evs(UM, SHUTDOWN))

    def test_only_the_last_30_entries_are_scanned(self) -> None:
        pairs = [TS, TC] * 15  # exactly 30 entries, all matched
        # The unmatched start is 31st from the end: outside PolyPilot's 30-line ring buffer.
        assert not has_interrupted_tool(evs(TS, *pairs))
        # 29 entries: the same unmatched start is inside the window.
        assert has_interrupted_tool(evs(TS, *pairs[:-2]))

    def test_ignores_typeless_entries(self) -> None:
        assert has_interrupted_tool([ev(AM), ev(TS), {"data": 1}, {"type": 5}])  # type: ignore[list-item]


# --- lost_turn --------------------------------------------------------------------------


class TestLostTurn:
    @pytest.mark.parametrize(
        "tail",
        [
            [UM],
            [UM, T0],
            [UM, T0, TS],
            [UM, T0, TS, TC],
            [UM, T0, TS, TP],
            [UM, SHUTDOWN],
            [UM, T0, SHUTDOWN, RESUME],
            [UM, T0, "session.usage_record", "permission.requested", "permission.completed"],
        ],
    )
    def test_turn_started_never_ended(self, tail: list[str]) -> None:
        assert lost_turn([ev(T0), ev(AM, content="earlier"), ev(T1), *evs(*tail)])

    @pytest.mark.parametrize("end", [T1, "session.idle", "abort", "session.error"])
    def test_turn_ended(self, end: str) -> None:
        assert not lost_turn(evs(UM, T0, TS, TC, end))
        assert not lost_turn(evs(UM, end, SHUTDOWN, RESUME))

    def test_answer_on_disk_is_not_lost(self) -> None:
        assert not lost_turn([ev(UM), ev(T0), ev(AM, content="Here you go")])

    def test_tool_request_message_without_text_is_lost(self) -> None:
        assert lost_turn([ev(UM), ev(T0), ev(AM, content="", toolRequests=[{"name": "bash"}])])
        assert lost_turn([ev(UM), ev(T0), {"type": AM}])
        assert lost_turn([ev(UM), ev(T0), {"type": AM, "data": "weird"}])

    def test_nothing_happened(self) -> None:
        assert not lost_turn([])
        assert not lost_turn(evs("session.start"))
        assert not lost_turn(evs("session.start", "system.message"))
        assert not lost_turn(evs(SHUTDOWN, RESUME, "session.usage_record"))

    def test_unknown_last_type_is_not_reported(self) -> None:
        assert not lost_turn(evs(UM, "some.future.event"))


# --- stat_log ----------------------------------------------------------------------------


class TestStatLog:
    def test_missing(self, tmp_path: Path) -> None:
        assert stat_log(tmp_path / "nope.jsonl", now_wall=time.time()) is None

    def test_directory(self, tmp_path: Path) -> None:
        assert stat_log(tmp_path, now_wall=time.time()) is None

    def test_size_age_last_type(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", line(UM) + "\n" + line(TS) + "\n")
        os.utime(p, (1000.0, 1000.0))
        assert stat_log(p, now_wall=1042.5) == LogStat(size=p.stat().st_size, age=42.5, last_type=TS)

    def test_age_never_negative(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", line(UM) + "\n")
        os.utime(p, (1000.0, 1000.0))
        assert stat_log(p, now_wall=900.0).age == 0.0  # type: ignore[union-attr]

    def test_empty_file(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", "")
        st_ = stat_log(p, now_wall=time.time())
        assert st_ is not None and st_.size == 0 and st_.last_type is None

    def test_partial_last_line_reports_previous_event(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", line(UM) + "\n" + line(T0) + "\n" + '{"type":"tool')
        assert stat_log(p, now_wall=time.time()).last_type == T0  # type: ignore[union-attr]

    def test_huge_last_line_is_not_read(self, tmp_path: Path) -> None:
        p = write(tmp_path / "e.jsonl", line(UM) + "\n" + line(AM, content="x" * 100_000) + "\n")
        st_ = stat_log(p, now_wall=time.time())
        assert st_ is not None and st_.last_type is None and st_.size > 100_000


# --- property tests ---------------------------------------------------------------------

EVENT_TYPES = [
    UM,
    T0,
    T1,
    AM,
    TS,
    TC,
    TP,
    RESUME,
    SHUTDOWN,
    "session.start",
    "session.idle",
    "session.error",
    "abort",
    "session.usage_record",
    "permission.requested",
    "x.y",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
valid_lines = st.builds(
    lambda kind, data: json.dumps({"type": kind, "data": data}),
    st.sampled_from(EVENT_TYPES),
    st.dictionaries(st.text(max_size=8), json_values, max_size=3),
)
garbage_lines = st.text(max_size=60).map(lambda s: s.replace("\n", " "))
non_dict_json = json_values.filter(lambda v: not isinstance(v, dict)).map(json.dumps)
odd_dicts = st.dictionaries(st.text(max_size=6), json_values, max_size=3).map(json.dumps)
partial_lines = valid_lines.flatmap(lambda s: st.integers(0, len(s)).map(lambda n: s[:n]))
any_line = st.one_of(valid_lines, valid_lines, garbage_lines, non_dict_json, odd_dicts, partial_lines)


def _reference_parse(lines: list[str]) -> list[dict[str, Any]]:
    """Line by line with the one bounded JSON reader (what is checked here is the framing)."""
    out = []
    for raw in lines:
        try:
            obj = load_json(raw.encode("utf-8", "surrogatepass").strip(), "reference")
        except ParseError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("type"), str) and obj["type"]:
            out.append(obj)
    return out


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(any_line, max_size=40),
    sep=st.sampled_from(["\n", "\r\n"]),
    trailing=st.booleans(),
    max_lines=st.integers(-1, 50),
    max_bytes=st.integers(-1, 4096),
    age=st.one_of(st.none(), st.floats(-10, 2000, allow_nan=False)),
)
def test_property_nothing_raises(
    tmp_path: Path, lines: list[str], sep: str, trailing: bool, max_lines: int, max_bytes: int, age: float | None
) -> None:
    text = sep.join(lines) + (sep if trailing and lines else "")
    p = write(tmp_path / "events.jsonl", text.encode("utf-8", "surrogatepass"))
    out = read_tail(p, max_lines=max_lines, max_bytes=max_bytes)
    assert isinstance(out, list) and all(isinstance(e, dict) for e in out)
    assert all(isinstance(e.get("type"), str) for e in out)
    assert len(out) <= max(0, max_lines)
    full = read_tail(p, max_lines=1000, max_bytes=1 << 20)
    # With a budget covering the whole file, read_tail is exactly a line-by-line parse.
    assert full == _reference_parse(text.replace("\r\n", "\n").split("\n"))
    for entries in (out, full):
        last_event_type(entries)
        is_still_processing(entries, age)
        has_interrupted_tool(entries)
        lost_turn(entries)
    assert stat_log(p, now_wall=time.time()) is not None


@given(
    st.lists(
        st.one_of(
            st.dictionaries(st.text(max_size=5), json_values, max_size=3),
            st.builds(lambda k, d: {"type": k, "data": d}, st.sampled_from(EVENT_TYPES), json_values),
        ),
        max_size=40,
    ),
    st.one_of(st.none(), st.floats(allow_nan=True)),
)
def test_property_pure_functions_accept_any_dicts(entries: list[dict[str, Any]], age: float | None) -> None:
    last_event_type(entries)
    is_still_processing(entries, age)
    has_interrupted_tool(entries)
    lost_turn(entries)


@st.composite
def matched_tool_runs(draw: st.DrawFn) -> list[str]:
    """A random interleaving of n parallel tools where every start precedes its complete."""
    n = draw(st.integers(1, 7))
    pending, started, out = list(range(n)), [], []
    while pending or started:
        if pending and (not started or draw(st.booleans())):
            started.append(pending.pop())
            out.append(TS)
        else:
            started.pop(draw(st.integers(0, len(started) - 1)))
            out.append(TC)
    return out


@given(matched_tool_runs(), st.lists(st.sampled_from([RESUME, SHUTDOWN]), max_size=3))
def test_property_matched_runs_are_never_interrupted(run: list[str], tail: list[str]) -> None:
    # The #393 regression as a property: any fully matched run, whatever the interleaving.
    assert not has_interrupted_tool(evs(UM, T0, AM, *run, *tail))


@given(matched_tool_runs(), st.integers(0, 100))
def test_property_dropping_a_complete_is_interrupted(run: list[str], pick: int) -> None:
    completes = [i for i, k in enumerate(run) if k == TC]
    drop = completes[pick % len(completes)]
    assert has_interrupted_tool(evs(UM, T0, AM, *(run[:drop] + run[drop + 1 :])))


def test_permission_events_inside_a_tool_run_do_not_hide_an_interrupted_tool() -> None:
    """The Copilot CLI logs permission.requested/completed between a tool's start and end."""
    from polypilot_tui.domain.eventlog import has_interrupted_tool

    tail = [
        {"type": "assistant.turn_start"},
        {"type": "tool.execution_start"},
        {"type": "permission.requested"},
        {"type": "permission.completed"},
    ]
    assert has_interrupted_tool(tail)
    assert not has_interrupted_tool(tail + [{"type": "tool.execution_complete"}])
