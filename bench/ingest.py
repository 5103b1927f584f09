"""Core ingest: events/s through the SessionManager vs merely json-decoding the same lines.

1M synthetic events (deltas, tool calls, usage, turn boundaries) across 50 sessions, in the
trace/events.jsonl line form. The ratio is (decode + manager) / decode, measured in one run.
Each read is timed twice, decoded alone and then through the engine, in CPU time of this
process (steadier than wall time on a shared machine). The engine gets the events as it
would from busy agents: the event loop runs between reads of :data:`READ_BYTES` (one pipe
read's worth), so the deltas that arrive together make one view change (EngineContext.streamed).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

from bench._support import AGENT, Row, bench_manager, bench_settings
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.records import Record, ViewChanged

SESSIONS = 50
EVENTS = 1_000_000
READ_BYTES = 65_536


def make_lines(count: int) -> list[tuple[int, str]]:
    """A realistic mix: mostly streamed deltas, with tool calls and usage events."""
    cycle: list[dict] = [{"type": "assistant.turn_start", "data": {"turnId": "t"}}]
    cycle += [{"type": "assistant.message_delta", "data": {"messageId": "m", "deltaContent": "token "}}] * 30
    cycle += [{"type": "session.usage_info", "data": {"currentTokens": 1200, "tokenLimit": 128000}}]
    cycle += [
        {
            "type": "tool.execution_start",
            "data": {"toolCallId": "c", "toolName": "bash", "arguments": {"command": "ls"}},
        },
        {"type": "tool.execution_progress", "data": {"toolCallId": "c", "progressMessage": "running"}},
        {
            "type": "tool.execution_complete",
            "data": {"toolCallId": "c", "success": True, "result": {"content": "a\nb"}},
        },
    ]
    cycle += [{"type": "assistant.message_delta", "data": {"messageId": "n", "deltaContent": "more "}}] * 10
    cycle += [{"type": "assistant.turn_end", "data": {}}]
    encoded = [json.dumps(e) for e in cycle]
    lines = []
    for i in range(count):
        lines.append((i % SESSIONS, encoded[(i // SESSIONS) % len(encoded)]))
    return lines


def reads(lines: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """The lines cut into reads of about :data:`READ_BYTES`."""
    chunks: list[list[tuple[int, str]]] = [[]]
    size = 0
    for entry in lines:
        chunks[-1].append(entry)
        size += len(entry[1])
        if size >= READ_BYTES:
            chunks.append([])
            size = 0
    return chunks


async def run() -> list[Row]:
    lines = make_lines(EVENTS)
    with tempfile.TemporaryDirectory() as tmp:
        manager, _ = bench_manager(bench_settings(Path(tmp)), FakeClock())
        ids = [await manager.create_session(AGENT) for _ in range(SESSIONS)]
        redraws = 0

        def listener(change: Record) -> None:
            nonlocal redraws
            redraws += 1

        manager.subscribe(listener, ViewChanged)
        for sid in ids:
            await manager.send(sid, "go")
        apply, loads, from_json, clock = manager.apply, json.loads, AgentEvent.from_json, time.process_time
        decode = full = 0.0
        for chunk in reads(lines):  # each read decoded alone, then through the engine: paired
            started = clock()
            for _, line in chunk:
                loads(line)
            decode += clock() - started
            started = clock()
            for index, line in chunk:
                apply(ids[index], from_json(loads(line)))
            await asyncio.sleep(0)  # the next read: the loop runs in between
            full += clock() - started
        turns = [manager.session(sid).turn for sid in ids]
        received = sum(turn.streamed_chars for turn in turns if turn is not None)
        await manager.shutdown()
    print(f"events:               {EVENTS:,} across {SESSIONS} sessions")
    print(f"json decode only:     {decode:.2f} s  ({EVENTS / decode:,.0f} events/s)")
    print(f"decode + manager:     {full:.2f} s  ({EVENTS / full:,.0f} events/s)")
    print(f"listener calls:       {redraws:,}")
    chars = {line: len(json.loads(line)["data"].get("deltaContent", "")) for line in {line for _, line in lines}}
    sent = sum(chars[line] for _, line in lines)
    if received != sent:
        raise RuntimeError(f"the sessions got {received:,} chars of the {sent:,} streamed")
    print(f"ratio (target <= 1.5x): {full / decode:.2f}x")
    figure = f"{full:.2f} s vs {decode:.2f} s: {full / decode:.2f}x"
    return [(f"ingest {EVENTS:,} events through the engine vs json-decoding them", figure, "≤ 1.5x")]


def main() -> list[Row]:
    return asyncio.run(run())


if __name__ == "__main__":
    main()
