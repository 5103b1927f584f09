"""A view event's changed fields applied to the mirror's view (engine/codec.py decode_fields):
the record it gives is the one ``dataclasses.replace`` gives, bad values are refused naming the
field, and a record whose ``__init__`` does more than set fields still goes through it."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import get_type_hints

import pytest

from polypilot_tui.domain.prompt_queue import QueueEntry
from polypilot_tui.domain.view import SessionStatus, SessionView
from polypilot_tui.engine.codec import decode, decode_fields, encode


def a_view() -> SessionView:
    return SessionView(
        id="s1", name="one", agent="demo", status=SessionStatus.WRITING, reason="", revision=5, streaming_chars=9
    )


def test_the_changed_fields_give_the_record_replace_gives_and_leave_the_rest() -> None:
    view = a_view()
    queue = (QueueEntry("k1", "a queued prompt", 15, 1),)
    changed = {"revision": 6, "status": "idle", "queue": encode(queue), "last_activity_at": 2.5}
    got = decode_fields(view, changed, "view")
    want = dataclasses.replace(view, revision=6, status=SessionStatus.IDLE, queue=queue, last_activity_at=2.5)
    assert got == want and hash(got) == hash(want)
    assert isinstance(got.status, SessionStatus) and isinstance(got.queue, tuple)
    assert view.revision == 5 and view.status is SessionStatus.WRITING  # the old record is untouched
    assert decode_fields(view, {}, "view") == view


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        ({"revision": "6"}, "view.revision: expected int, got str"),
        ({"revision": True}, "view.revision: expected int, got bool"),  # a bool is no int
        ({"streaming_chars": 1.5}, "view.streaming_chars: expected int, got float"),
        ({"last_activity_at": "2"}, "view.last_activity_at: expected float or null, got str"),
        ({"status": 3}, "view.status: expected str, got int"),
        ({"status": "bogus"}, "view.status: 'bogus' is not a SessionStatus"),
        ({"no_such_field": 1}, "view: no field 'no_such_field'"),
        ({"queue": [{"key": 1}]}, "view.queue[0]"),
    ],
)
def test_a_bad_changed_field_is_refused_naming_it(changed: dict[str, object], said: str) -> None:
    with pytest.raises(ValueError, match=r"^" + re.escape(said)):
        decode_fields(a_view(), changed, "view")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("revision", 6),
        ("last_activity_at", 2),  # an int for a float reads as a float
        ("last_activity_at", None),
        ("status", "idle"),
        ("model", "gpt"),
        ("pending_permission", None),
        ("pending_permission", {"request_id": "r", "title": "t"}),
        ("queue", []),
    ],
)
def test_each_changed_field_reads_as_decode_reads_it(name: str, value: object) -> None:
    """Values already of their field's type and enums' strings are taken without msgspec: the
    same values, of the same types."""
    got = getattr(decode_fields(a_view(), {name: value}, "view"), name)
    want = decode(get_type_hints(SessionView)[name], value)
    assert got == want and type(got) is type(want)


@dataclass(frozen=True)
class Checked:
    low: int
    high: int = 10

    def __post_init__(self) -> None:
        if self.high < self.low:
            raise ValueError("high is below low")


def test_a_record_that_checks_itself_is_built_through_its_init() -> None:
    assert decode_fields(Checked(1), {"high": 3}) == Checked(1, 3)
    with pytest.raises(ValueError, match="high is below low"):
        decode_fields(Checked(5), {"high": 3})
