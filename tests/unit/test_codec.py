"""The engine's JSON codec (engine/codec.py, msgspec): JSON's rules on what it reads, the bad
field named in our words, and what it writes, on the records that travel (views, rows, requests)
and on a record of each shape they use (Literal, ``X | None``, tuples, dicts, nested records)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Literal

import pytest

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.safe_json import dump_json, load_json
from polypilot_tui.domain.turn import PermissionPrompt
from polypilot_tui.domain.view import SessionStatus, SessionView
from polypilot_tui.engine.codec import (
    decode,
    decode_fields,
    decode_text,
    encode,
    from_text,
    items_from_json,
    view_from_json,
)
from polypilot_tui.engine.verbs import HistoryRange


@dataclass(frozen=True)
class Shapes:
    """One field of each shape our records use."""

    word: Literal["sent", "queued"]
    count: int | None = None
    prompts: tuple[PermissionPrompt, ...] = ()
    triple: tuple[str, int, float] = ("", 0, 0.0)
    tally: dict[str, int] = dataclasses.field(default_factory=dict)
    status: SessionStatus = SessionStatus.IDLE
    ratio: float = 0.5


def a_view(**changes: Any) -> SessionView:
    prompt = PermissionPrompt("r1", "Write file x", options=(("allow_once", "Allow", "allow_once"),))
    view = SessionView(id="s1", name="one", agent="demo", status=SessionStatus.WRITING, reason="", revision=5)
    return dataclasses.replace(view, pending_permission=prompt, **changes)


def test_what_encode_writes_reads_back_through_json_text() -> None:
    shapes = Shapes("queued", 3, (PermissionPrompt("r", "t"),), ("a", 1, 2.5), {"x": 1}, SessionStatus.WRITING)
    rows = (ChatItem(ItemKind.TOOL, "ls\ud800", 1.5, "t1", "bash"), ChatItem(ItemKind.USER, "hi", 2.0))
    for value, form in ((shapes, Shapes), (a_view(), SessionView), (rows, tuple[ChatItem, ...])):
        plain = encode(value, form)
        assert decode(form, load_json(dump_json(plain), "test")) == value
    plain = encode(shapes)
    # enums as their strings, nested records as objects, tuples as they are (JSON arrays), None as null
    assert plain["status"] == "writing" and type(plain["status"]) is str
    assert plain["prompts"] == (
        {"request_id": "r", "title": "t", "detail": "", "kind": "", "tool_call_id": None, "options": ()},
    )
    assert plain["triple"] == ("a", 1, 2.5) and plain["tally"] == {"x": 1} and plain["ratio"] == 0.5
    assert dump_json(encode(rows[0])) == (
        '{"kind": "tool", "text": "ls\\ud800", "at": 1.5, "tool_call_id": "t1", "tool_name": "bash", '
        '"tool_status": "", "tool_detail": "", "interrupted": false}'
    )
    assert encode(None) is None


def test_json_values_read_as_their_types() -> None:
    read = decode(Shapes, {"word": "sent", "triple": ["a", 1, 2], "prompts": [{"request_id": "r", "title": "t"}]})
    assert read.word == "sent" and read.triple == ("a", 1, 2.0) and type(read.triple[2]) is float  # 2 reads as 2.0
    assert read.prompts == (PermissionPrompt("r", "t"),) and read.count is None and read.tally == {}
    assert decode(Shapes, {"word": "sent", "status": "writing", "no such field": 1}).status is SessionStatus.WRITING
    # a lone surrogate an agent sent, as load_json reads it (a UTF-8 parser refuses it)
    row = items_from_json(load_json('[{"kind": "assistant", "text": "a\\ud800b", "at": 1}]', "history"))[0]
    assert row.text == "a\ud800b" and row.kind is ItemKind.ASSISTANT and row.at == 1.0


def test_defaults_missing_from_what_was_read_are_written_again() -> None:
    """msgspec leaves a missing field whose default the class holds off the instance, where its
    encoder does not look: the codec stores it, so a record read from an older engine's shorter
    object encodes whole (a view, its prompt, prompts in a tuple)."""
    short = {"id": "s1", "name": "one", "agent": "demo", "status": "writing", "reason": "", "revision": 5}
    view = view_from_json({**short, "pending_permission": {"request_id": "r1", "title": "Write file x"}})
    whole = SessionView(
        id="s1", name="one", agent="demo", status=SessionStatus.WRITING, reason="", revision=5,
        pending_permission=PermissionPrompt("r1", "Write file x"),
    )  # fmt: skip
    assert view == whole and encode(view) == encode(whole)
    assert len(encode(view)) == len(dataclasses.fields(SessionView))
    shapes = decode(Shapes, {"word": "sent", "prompts": [{"request_id": "r", "title": "t"}]})
    assert encode(shapes) == encode(Shapes("sent", prompts=(PermissionPrompt("r", "t"),)))
    changed = decode_fields(a_view(), {"pending_permission": {"request_id": "r2", "title": "t"}}, "view")
    assert encode(changed)["pending_permission"] == encode(PermissionPrompt("r2", "t"))


@pytest.mark.parametrize(
    ("form", "obj", "said"),
    [
        (int, "7", "n: expected int, got str"),  # a string is never read as a number
        (str, 7, "n: expected str, got int"),  # nor a number as a string
        (int, True, "n: expected int, got bool"),  # a bool is no int
        (int, 1.5, "n: expected int, got float"),
        (bool, 1, "n: expected bool, got int"),
        (int | None, "7", "n: expected int or null, got str"),
        (SessionStatus, "bogus", "n: 'bogus' is not a SessionStatus"),
        (Shapes, {"word": "x"}, "n.word: 'x' is not one of 'sent' or 'queued'"),
        (Shapes, {}, "n: 'word' is missing"),
        (Shapes, {"word": "sent", "count": "3"}, "n.count: expected int or null, got str"),
        (Shapes, {"word": "sent", "triple": ["a", 1]}, "n.triple: expected a list of length 3, got 2"),
        (Shapes, {"word": "sent", "tally": {"x": "1"}}, "n.tally[...]: expected int, got str"),
        (Shapes, {"word": "sent", "prompts": [{"request_id": "r"}]}, "n.prompts[0]: 'title' is missing"),
        (Shapes, {"word": "sent", "prompts": {}}, "n.prompts: expected a list, got an object"),
        (SessionView, [], "n: expected an object, got a list"),
        (
            tuple[ChatItem, ...],
            [{"kind": "user", "text": "a", "at": 0}, {"kind": "x"}],
            "n[1].kind: 'x' is not a ItemKind",
        ),
        (None, 1, "n: expected null, got int"),
    ],
)
def test_a_bad_value_is_refused_naming_its_path_in_our_words(form: Any, obj: Any, said: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(said) + "$"):
        decode(form, obj, "n")


def test_only_the_first_bad_field_is_named() -> None:
    """msgspec stops at the first bad field (pydantic named up to three): a value with two bad
    fields names the one it met first, and only it."""
    with pytest.raises(ValueError, match=r"^view\.revision: expected int, got str$"):
        view_from_json({**encode(a_view()), "revision": "6", "turns": "x"})


def test_values_that_arrive_as_text_read_numbers_written_as_text() -> None:
    assert decode_text(int, "7") == 7 and decode_text(str, "7") == "7"
    assert from_text(HistoryRange, {"session_id": "s1", "start": "3", "other": "x"}) == {"session_id": "s1", "start": 3}
    assert decode(HistoryRange, {"session_id": "s1", **from_text(HistoryRange, {"limit": "9"})}) == HistoryRange(
        "s1", 0, 9
    )
    with pytest.raises(ValueError, match=r"^limit: expected int, got str$"):
        from_text(HistoryRange, {"limit": "many"})
