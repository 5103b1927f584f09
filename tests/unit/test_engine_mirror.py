"""The engine service's wire, end to end without a socket: what a StreamClient sends, folded
by a RemoteEngine, is the engine's state — views, history, the reply streaming now — after
every step of real turns on the demo agent in virtual time (deltas, tools, permissions,
stop, close and reopen)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.safe_json import dump_json, load_json
from polypilot_tui.engine import verbs
from polypilot_tui.engine.codec import encode, items_from_json
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.service.remote import RemoteEngine
from polypilot_tui.service.stream_client import StreamClient
from tests.support.engine import Harness
from tests.support.sse import parse_sse
from tests.support.waiting import advance_until


class Mirror(RemoteEngine):
    """A RemoteEngine whose history requests are answered by the engine itself (no socket)."""

    def __init__(self, engine: LocalEngine) -> None:
        super().__init__(self._no_socket)
        self._engine = engine

    @staticmethod
    async def _no_socket() -> Path:
        raise AssertionError("the mirror is fed by hand here")

    async def _fetch_history(self, sid: str) -> list[ChatItem]:
        """What ``GET /sessions/{sid}/history`` answers, through JSON text."""
        rows = encode(tuple(self._engine.history(sid)), tuple[ChatItem, ...])
        return items_from_json(load_json(dump_json(rows), "history"))


class Wire:
    """An engine, a stream client of it, and a mirror fed through JSON text (as on the socket)."""

    def __init__(self, harness: Harness) -> None:
        self.engine = harness.engine
        self.client = StreamClient(self.engine, 1, frame=0)  # every view at once: exact after each step
        self.client.attach()
        self.mirror = Mirror(self.engine)
        self.events = 0
        self._feed([("snapshot", self.client.snapshot(with_history=True))])

    def _feed(self, events: list[tuple[str, object]]) -> None:
        for kind, data in events:
            self.mirror.apply_event(kind, load_json(dump_json(data), kind))
            self.events += 1

    async def sync(self) -> None:
        """Send what is queued, then check the mirror holds exactly the engine's state (a
        history it has not got yet it asks for, as a dashboard showing it would)."""
        self._feed(parse_sse(self.client.drain()))
        engine, mirror = self.engine, self.mirror
        assert mirror.ids() == engine.ids()
        for sid in engine.ids():
            mirror.history(sid)
        for _ in range(5):
            await asyncio.sleep(0)  # the asked-for histories arrive
        for sid in engine.ids():
            assert mirror.view(sid) == engine.view(sid)
            assert mirror.history(sid) == engine.history(sid)
            assert mirror.streaming_text(sid) == engine.streaming_text(sid)


async def step_until_rest(harness: Harness, wire: Wire, sid: str) -> int:
    """Advance virtual time deadline by deadline, checking the mirror at each; returns the steps."""
    steps = []

    async def look() -> None:
        steps.append(harness.clock.now())
        await wire.sync()

    await advance_until(harness.clock, lambda: not harness.busy(sid), each=look, what=f"{sid} at rest")
    await harness.manager.idle()
    await wire.sync()
    return len(steps) - 1


async def test_a_streamed_reply_a_tool_and_a_permission_arrive_whole(harness: Harness) -> None:
    wire = Wire(harness)
    sid = await wire.engine.call(verbs.NEW_SESSION, verbs.NewSession("demo", "mirrored"))
    await harness.manager.connect(sid)
    await wire.sync()
    await wire.engine.call(verbs.SEND, verbs.Send(sid, "!slow stream it"))
    assert await step_until_rest(harness, wire, sid) > 20  # checked between many deltas
    assert "word59" in wire.mirror.history(sid)[-1].text
    await wire.engine.call(verbs.SEND, verbs.Send(sid, "look at the project"))  # a tool row, replaced when it completes
    await step_until_rest(harness, wire, sid)
    await wire.engine.call(verbs.SEND, verbs.Send(sid, "!permission write the file"))
    await harness.until(lambda: wire.engine.view(sid).pending_permission is not None)
    await wire.sync()
    request = wire.mirror.view(sid).pending_permission
    assert request is not None and request.options
    await wire.engine.call(
        verbs.ANSWER_PERMISSION, verbs.AnswerPermission(sid, request.request_id, request.options[0][0])
    )
    await step_until_rest(harness, wire, sid)
    assert wire.mirror.view(sid).pending_permission is None


async def test_a_stop_mid_reply_then_close_and_reopen_keep_the_mirror_exact(harness: Harness) -> None:
    wire = Wire(harness)
    sid = await wire.engine.call(verbs.NEW_SESSION, verbs.NewSession("demo"))
    await harness.manager.connect(sid)
    await wire.engine.call(verbs.SEND, verbs.Send(sid, "!slow to be stopped"))
    await harness.until(lambda: "word5" in wire.engine.streaming_text(sid))
    await wire.sync()
    await wire.engine.call(verbs.STOP, verbs.SessionRef(sid))
    await step_until_rest(harness, wire, sid)
    assert wire.mirror.streaming_text(sid) == "" and wire.mirror.history(sid)[-1].interrupted is not None
    await wire.engine.call(
        verbs.SEND, verbs.Send(sid, "!slow again")
    )  # a new reply after a stopped one: the stream restarts
    await step_until_rest(harness, wire, sid)
    assert await wire.engine.call(verbs.CLOSE, verbs.SessionRef(sid))
    await wire.sync()
    assert wire.mirror.ids() == []
    await wire.engine.call(verbs.REOPEN, verbs.Reopen(sid))
    await wire.sync()
    assert wire.mirror.history(sid)[0].text == "!slow to be stopped"


async def test_a_view_goes_after_the_rows_queued_before_its_change(harness: Harness) -> None:
    """A view queued early and changed again later is sent after what came between (a client
    read the turn as over before its reply's rows had arrived)."""
    wire = Wire(harness)
    sid = await harness.new()
    await harness.manager.send(sid, "!slow")
    await harness.clock.advance(1.0)  # streaming: the session's view is queued (not sent yet)
    await harness.manager.stop(sid)  # the reply's row, the turn over, its view changed again
    kinds = [kind for kind, _ in parse_sse(wire.client.drain())]
    views = [i for i, kind in enumerate(kinds) if kind == "view"]
    assert len(views) == 1 and "change" in kinds, kinds
    assert views[0] > max(i for i, kind in enumerate(kinds) if kind == "change"), kinds


class CountedMirror(Mirror):
    """A mirror that counts the histories it fetches."""

    def __init__(self, engine: LocalEngine) -> None:
        super().__init__(engine)
        self.fetched: list[str] = []

    async def _fetch_history(self, sid: str) -> list[ChatItem]:
        self.fetched.append(sid)
        return await super()._fetch_history(sid)


async def test_an_attach_carries_views_only_and_fetches_the_shown_sessions_history_alone(harness: Harness) -> None:
    """An attach's snapshot holds every session's view and no history row (a dashboard attaching
    to hundreds of sessions draws its first frame from the views); the history of the session it
    shows is fetched when it is shown, and no other is fetched until it is looked at."""
    sessions = [await harness.new() for _ in range(4)]
    for i, sid in enumerate(sessions):
        await harness.manager.send(sid, f"row text of session {i}")
        await harness.until_rest(sid)
    client = StreamClient(harness.engine, 1)
    client.attach()
    snapshot = load_json(dump_json(client.snapshot()), "snapshot")
    assert [sorted(s) for s in snapshot["sessions"]] == [["streaming", "view"]] * len(sessions)
    assert "row text of session" not in dump_json(snapshot)
    mirror = CountedMirror(harness.engine)
    mirror.apply_event("snapshot", snapshot)
    assert mirror.ids() == sessions and mirror.fetched == []
    shown = sessions[2]
    mirror.history(shown)
    await harness.clock.settle()
    assert mirror.fetched == [shown]
    assert mirror.history(shown) == harness.engine.history(shown)
    assert mirror.fetched == [shown]  # held, not fetched again
