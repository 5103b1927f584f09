"""What one attached client is sent, and when, on the engine's clock (virtual here): a keepalive
comment when the stream has been silent for the interval — and no other wake-up; views once a
frame, every session that moved in one batch; a big field of a view once, not
with every view; and a fresh snapshot in place of what a client that stopped reading missed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.verbs import ENGINE_INFO, NEW_SESSION, RENAME, SEND, NewSession, NoArgs, Rename, Send
from polypilot_tui.service.client import EngineClient
from polypilot_tui.service.outbox import Outbox
from polypilot_tui.service.stream_client import FRAME, StreamClient
from tests.support.engine import Harness
from tests.support.engine_service import serving_in_process
from tests.support.sse import KEEPALIVE, parse_sse
from tests.support.stream_clients import dechunk

READ_WAIT = 10.0
"""Real seconds a byte the engine wrote may take to arrive (a hang guard, not a target)."""


class RawStream:
    """``GET /v1/stream`` on a socket, read as bytes (comments included)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.raw = b""

    @classmethod
    async def open(cls, socket: Path) -> RawStream:
        reader, writer = await asyncio.open_unix_connection(str(socket))
        writer.write(b"GET /v1/stream HTTP/1.1\r\nHost: engine\r\n\r\n")
        await writer.drain()
        return cls(reader, writer)

    def events(self) -> list[tuple[str, Any]]:
        return parse_sse(dechunk(self.raw))

    async def until(self, count: int, kind: str) -> list[tuple[str, Any]]:
        """Read until ``count`` events of ``kind`` (":" for comments) have come; all events so far."""
        while sum(1 for k, _ in self.events() if k == kind) < count:
            chunk = await asyncio.wait_for(self.reader.read(1 << 16), READ_WAIT)
            assert chunk, "the engine closed the stream"
            self.raw += chunk
        return self.events()

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def test_a_silent_stream_gets_a_keepalive_each_interval_after_its_last_event_and_nothing_else(
    harness: Harness,
) -> None:
    engine = LocalEngine(harness.manager)
    sid = await engine.call(NEW_SESSION, NewSession("demo", "one"))
    clock = harness.clock
    async with serving_in_process(engine) as socket:
        stream = await RawStream.open(socket)
        await stream.until(1, "snapshot")
        attached_at = clock.now()
        # 14.9 s of silence, then an event: no keepalive came before it (bytes arrive in order).
        await clock.advance(14.9)
        await engine.call(RENAME, Rename(sid, "two"))
        assert [k for k, _ in await stream.until(1, "view")] == ["snapshot", "view"]
        # The event moved the next keepalive to 15 s after it, not 15 s after the attach.
        await clock.advance_to(attached_at + 14.9 + 14.9)
        await engine.call(RENAME, Rename(sid, "three"))
        assert [k for k, _ in await stream.until(2, "view")] == ["snapshot", "view", "view"]
        sent_at = clock.now()
        await clock.advance_to(sent_at + 15.0)
        events = await stream.until(1, ":")
        assert events[-1] == (":", KEEPALIVE)
        # Idle: the client's one timer is the next keepalive, 15 s on (an idle engine wakes for
        # nothing else), and it comes then.
        assert clock.next_deadline() == sent_at + 30.0
        await clock.advance_to(sent_at + 30.0)
        assert [k for k, _ in await stream.until(2, ":")][-3:] == ["view", ":", ":"]
        await stream.close()
        client = EngineClient(socket)
        try:
            for _ in range(200):  # the engine notices the client left, then forgets its timer
                if (await client.call(ENGINE_INFO, NoArgs())).attached == 0:
                    break
                await asyncio.sleep(0.02)
            assert (await client.call(ENGINE_INFO, NoArgs())).attached == 0
        finally:
            await client.aclose()
        assert clock.next_deadline() is None


def delta(text: str) -> AgentEvent:
    return AgentEvent(EventType.MESSAGE_DELTA, {"messageId": "m", "deltaContent": text})


async def test_a_flooding_sessions_views_go_once_a_frame_with_all_its_text_and_the_others_with_them(
    harness: Harness,
) -> None:
    """Views go to a client at most once a frame, every session that moved in the same batch: a
    flood's views once a frame with all its text since the last, another session's first view
    within that frame, with them (one write for both, not one per session)."""
    engine = LocalEngine(harness.manager)
    flood, other = await harness.new(), await harness.new()
    for sid in (flood, other):
        await engine.call(SEND, Send(sid, "!hang"))  # a turn that waits: the deltas below are its reply
    client = StreamClient(engine, 1)
    client.attach()
    client.snapshot()
    await harness.clock.settle()
    client.drain()
    await harness.clock.advance(FRAME)  # the snapshot's views are a frame old

    def sent() -> list[tuple[str, Any]]:
        return [(k, d) for k, d in parse_sse(client.drain()) if k == "view"]

    async def stream(sid: str, text: str) -> None:
        harness.manager.apply(sid, delta(text))
        await harness.clock.settle()  # the engine tells a reply moved once per loop turn

    await stream(flood, "a")
    first = sent()
    assert [(d["session_id"], d["stream"]) for _, d in first] == [(flood, "a")]  # after a quiet frame: at once
    for text in "bcdefgh":  # a flood: many loop turns within one frame
        await harness.clock.advance(FRAME / 10)
        await stream(flood, text)
        assert sent() == []
    await stream(other, "other's first")
    assert sent() == []  # it goes with the flood's, within this frame
    await harness.clock.advance_to(harness.clock.now() + FRAME)  # the frame is due
    views = {data["session_id"]: data for _, data in sent()}
    assert (views[flood]["stream_from"], views[flood]["stream"]) == (1, "bcdefgh")
    assert views[flood]["changed"]["streaming_chars"] == 8
    assert views[other]["stream"] == "other's first"
    assert engine.streaming_text(flood) == "abcdefgh"


async def test_a_field_of_a_view_goes_out_when_it_changes_not_with_every_view(harness: Harness) -> None:
    """Ten prompts queued behind a running turn, then a reply streaming 200 deltas, each sent as
    a view: the queue goes out once, with the view that saw it change, never with the views
    that only moved the reply (every view carried it: 215 MB for a queue of 10 MB)."""
    engine = LocalEngine(harness.manager)
    sid = await harness.new()
    await engine.call(SEND, Send(sid, "!hang"))
    client = StreamClient(engine, 1, frame=0)  # every view at once: the worst case
    client.attach()
    client.snapshot()
    for i in range(10):
        await engine.call(SEND, Send(sid, f"queued {i} " + "q" * 100_000))
    await harness.clock.settle()
    queued = [data for kind, data in parse_sse(client.drain()) if kind == "view"]
    assert len(queued) == 1 and len(queued[0]["changed"]["queue"]) == 10
    views, sent = 0, 0
    for i in range(200):
        harness.manager.apply(sid, delta(f"word{i} "))
        await harness.clock.settle()
        for kind, data in parse_sse(client.drain()):
            views += kind == "view"
            assert "queue" not in data.get("changed", {}), f"the queue went out again with view {views}"
            sent += len(dump_json(data))
    assert views == 200 and sent < 200 * 400  # what moved: revision, counts, times and the text
    assert len(engine.view(sid).queue) == 10


async def test_a_client_that_fell_behind_gets_a_fresh_snapshot_with_the_reason_and_goes_on_from_there(
    harness: Harness,
) -> None:
    engine = LocalEngine(harness.manager)
    sid = await harness.new()
    await engine.call(SEND, Send(sid, "!hang"))
    client = StreamClient(engine, 1, events=True, only=sid, outbox=Outbox(4096))
    client.attach()
    client.snapshot()
    for i in range(300):  # tool progress events: nothing to coalesce
        harness.manager.apply(sid, AgentEvent(EventType.TOOL_PROGRESS, {"toolCallId": "t", "progressMessage": str(i)}))
    harness.manager.apply(sid, delta("after"))
    await harness.clock.settle()
    ((kind, data),) = parse_sse(client.drain())
    assert kind == "resync" and client.resyncs == 1
    assert data["reason"].startswith("the client did not read:")
    (session,) = data["sessions"]
    assert session["view"]["id"] == sid and session["streaming"] == "after"
    harness.manager.apply(sid, delta(" more"))
    await harness.clock.settle()
    events = parse_sse(client.drain())
    assert [k for k, _ in events] == ["event", "view"]
    assert events[0][1]["data"]["deltaContent"] == " more"
    assert (events[1][1]["stream_from"], events[1][1]["stream"]) == (5, " more")


async def test_first_views_go_at_once_whatever_number_the_engines_clock_reads(tmp_path: Path) -> None:
    """A monotonic clock's origin is arbitrary (another machine's can read below zero): a view
    never sent, and a follower's first batch, wait for no frame, and nothing is lost."""
    for start in (-1_000.0, -FRAME / 2, 0.0, 1e9):
        settings = Settings.read(None, state_dir=tmp_path, record=False)
        harness = Harness(build_engine(settings, load_agents(None), FakeClock(start), persist=False))
        engine = harness.engine
        try:
            sid = await harness.new()
            await engine.call(SEND, Send(sid, "!hang"))
            everyone, follower = StreamClient(engine, 1), StreamClient(engine, 2, only=sid)
            for client in (everyone, follower):
                client.attach()
                client.snapshot()
            await harness.clock.settle()
            for client in (everyone, follower):
                client.drain()
            harness.manager.apply(sid, delta("first"))
            await harness.clock.settle()
            for client in (everyone, follower):
                views = [data for kind, data in parse_sse(client.drain()) if kind == "view"]
                assert [(d["session_id"], d["stream"]) for d in views] == [(sid, "first")], (start, client.only)
        finally:
            await engine.close()


class CountedClient(StreamClient):
    """A stream client that counts its wake-ups (each wake-up is a drain)."""

    drains = 0

    def drain(self) -> str:
        self.drains += 1
        return super().drain()


async def test_a_flood_within_a_frame_wakes_the_client_once_a_frame_not_once_a_delta(harness: Harness) -> None:
    """Fifty deltas of one session within one frame, each told by the engine in a loop turn of
    its own: the client wakes for the first view and at the frame's end, not for every delta
    (each wake-up was a batch built, the held views queued again and a timer armed: 6,900 wakes
    for 880 writes under 20 sessions x 100 deltas/s); what it sends is every delta's text, in order."""
    engine = LocalEngine(harness.manager)
    flood = await harness.new()
    await engine.call(SEND, Send(flood, "!hang"))
    client = CountedClient(engine, 1)
    detach = client.attach()
    client.snapshot()
    sent: list[str] = []

    async def read() -> None:
        async for text in client.frames():
            sent.append(text)

    reader = asyncio.create_task(read())
    try:
        await harness.clock.settle()
        sent.clear()
        harness.manager.apply(flood, delta("<0>"))
        await harness.clock.settle()
        assert len(sent) == 1  # its first view goes at once
        woken = client.drains
        for i in range(1, 50):
            await harness.clock.advance(FRAME / 100)
            harness.manager.apply(flood, delta(f"<{i}>"))
            await harness.clock.settle()
        assert client.drains == woken and len(sent) == 1  # nobody woke for the flood's views
        await harness.clock.advance(FRAME)  # the frame is over: one batch with the rest
        assert client.drains == woken + 1 and len(sent) == 2
        views = [data for text in sent for kind, data in parse_sse(text) if kind == "view"]
        assert "".join(d["stream"] for d in views) == "".join(f"<{i}>" for i in range(50))
    finally:
        reader.cancel()
        detach()


async def test_sessions_streaming_out_of_step_are_sent_one_batch_a_frame(harness: Harness) -> None:
    """Five sessions streaming, each delta at its own moment within every frame: the client is
    written one batch a frame holding every session's view, not one batch per session (each
    session on a frame of its own made 5 writes a frame, 600 a second for 20 sessions)."""
    engine = LocalEngine(harness.manager)
    sessions = [await harness.new() for _ in range(5)]
    for sid in sessions:
        await engine.call(SEND, Send(sid, "!hang"))
    client = CountedClient(engine, 1)
    detach = client.attach()
    client.snapshot()
    sent: list[str] = []

    async def read() -> None:
        async for text in client.frames():
            sent.append(text)

    reader = asyncio.create_task(read())
    try:
        await harness.clock.advance(FRAME)
        sent.clear()
        frames = 6
        for n in range(frames):
            for sid in sessions:  # out of step: each a fifth of a frame after the last
                harness.manager.apply(sid, delta(f"<{n}>"))
                await harness.clock.advance(FRAME / len(sessions))
        await harness.clock.advance(FRAME)
        assert len(sent) <= frames + 2, f"{len(sent)} writes for {frames} frames"
        texts = dict.fromkeys(sessions, "")
        for text in sent:
            for kind, data in parse_sse(text):
                if kind == "view":
                    texts[data["session_id"]] += data["stream"]
        assert texts == dict.fromkeys(sessions, "".join(f"<{n}>" for n in range(frames)))
    finally:
        reader.cancel()
        detach()
