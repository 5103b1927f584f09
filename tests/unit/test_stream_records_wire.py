"""The record stream is the engine's wire protocol: every record goes to JSON text and back.

The records are the ones a real run of the engine emits (the demo agent in virtual time:
a tool turn, a refused permission, a stop mid-reply, a restart-interrupted resend, a hang
the watchdog ends), so a field added to a record without a wire form fails here.
"""

from __future__ import annotations

import json

import pytest

from polypilot_tui.agents.base import REJECT_ONCE
from polypilot_tui.domain.records import RECORD_TYPES, EventReceived, Record
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.engine.codec import record_from_json, record_to_json
from tests.support.engine import Harness


async def recorded_run(harness: Harness) -> list[Record]:
    changes: list[Record] = []
    harness.manager.subscribe(changes.append)
    sid = await harness.new()
    await harness.manager.send(sid, "please look around the project")
    await harness.until_rest(sid)
    await harness.manager.send(sid, "!permission")
    await harness.until(lambda: harness.manager.view(sid).pending_permission is not None)
    prompt = harness.manager.view(sid).pending_permission
    assert prompt is not None
    await harness.manager.answer_permission(sid, prompt.request_id, REJECT_ONCE)
    await harness.until_rest(sid)
    await harness.manager.send(sid, "!slow")
    await harness.until(lambda: len(harness.manager.streaming_text(sid)) > 5)
    await harness.manager.stop(sid)
    await harness.until_rest(sid)
    await harness.manager.send(sid, "!hang")
    await harness.until_rest(sid)
    await harness.manager.close(sid)
    return changes


async def test_every_record_of_a_real_run_survives_the_wire(harness: Harness) -> None:
    changes = await recorded_run(harness)
    assert {type(change) for change in changes} == set(RECORD_TYPES)  # the run covers every kind
    for change in changes:
        text = dump_json(record_to_json(change))  # strict JSON, as a client would receive it
        back = record_from_json(json.loads(text))
        # repr, not ==: a StrEnum equals its string and 1 equals 1.0; the types must come back too
        assert typed(back) == typed(change), text


def typed(change: Record) -> str:
    """The record with its types showing; an event's type is a plain string on the wire and
    in traces (AgentEvent.type is a str, and the engine's known types are str enums)."""
    if isinstance(change, EventReceived):
        return repr((change.session_id, str(change.event.type), change.event.data))
    return repr(change)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"change": "Nope"}, "unknown change 'Nope'"),
        ({}, "unknown change None"),
        ({"change": "ViewChanged", "session_id": "s1"}, "ViewChanged: "),
        ({"change": "ViewChanged", "session_id": "s1", "revision": "7"}, "ViewChanged.revision: expected int"),
        ({"change": "ViewChanged", "session_id": 3, "revision": 7}, "ViewChanged.session_id: expected str"),
        ({"change": "ActionTaken", "session_id": "s1", "action": "explode"}, "is not a EngineAction"),
        ({"change": "ItemAdded", "session_id": "s1", "index": 0, "item": []}, "ItemAdded.item: expected an object"),
        (
            {"change": "ItemAdded", "session_id": "s1", "index": 0, "item": {"kind": "user", "text": 1, "at": 0}},
            "ItemAdded.item.text: expected str",
        ),
        ({"change": "EventReceived", "session_id": "s1", "event": {"data": {}}}, "non-empty string 'type'"),
        (
            {"change": "TurnEnded", "session_id": "s1", "record": {"seq": 1, "refused": "x"}},
            "TurnEnded.record.refused: expected a list",
        ),
    ],
)
def test_a_record_of_another_shape_is_refused_by_name(obj: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        record_from_json(obj)
