"""Reading the engine's live stream: server-sent events from bytes cut anywhere."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polypilot_tui.service.sse import EventTooLarge, StreamEvent, read_events


async def chunks_of(parts: Sequence[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def events(parts: Sequence[bytes], limit: int = 1000) -> list[StreamEvent]:
    return [event async for event in read_events(chunks_of(parts), limit)]


STREAM = (
    b": keepalive\n\n"
    b'event: snapshot\ndata: {"a": 1}\n\n'
    b"event:change\r\ndata:  two spaces\r\n\r\n"
    b"data: first\rdata: second\r\r"
    b"id: 7\nretry: 10\nevent: view\ndata\nnonsense: x\n\n"
    + "event: wide\ndata: ü€😀 a reply in any script\n\n".encode()
    + b"event: cut\ndata: never dispatched"
)
EXPECTED = [
    StreamEvent("snapshot", '{"a": 1}'),
    StreamEvent("change", " two spaces"),  # only the one space after the colon is dropped
    StreamEvent("message", "first\nsecond"),  # no event named; data lines joined
    StreamEvent("view", ""),  # a field without a colon has an empty value
    StreamEvent("wide", "ü€😀 a reply in any script"),  # a character cut between reads is whole
]


async def test_every_line_ending_field_and_comment_is_read_as_the_standard_says() -> None:
    assert await events([STREAM]) == EXPECTED


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
async def test_where_the_bytes_are_cut_changes_nothing(cuts: list[int]) -> None:
    """A CR last in one read and its LF first in the next is one line ending, not two."""
    at = sorted(set(cuts))
    parts = [STREAM[a:b] for a, b in zip([0, *at], [*at, len(STREAM)], strict=True)]
    assert await events(parts) == EXPECTED


async def test_an_event_at_the_limit_is_read_whole_however_it_is_cut() -> None:
    """The limit is the data's bytes (lines joined by newlines): the line of one at the limit,
    its CR last in one read, is not refused for the field's name around it."""
    one = b"data: " + b"z" * 1000 + b"\r\n\r\n"
    cut_before_crlf = [one[:-4], one[-4:-3], one[-3:]]
    assert await events(cut_before_crlf) == [StreamEvent("message", "z" * 1000)]
    two = b"data: " + b"z" * 499 + b"\ndata: " + b"z" * 500 + b"\n\n"
    assert await events([two]) == [StreamEvent("message", "z" * 499 + "\n" + "z" * 500)]
    with pytest.raises(EventTooLarge):
        await events([b"data: " + "é".encode() * 501 + b"\n\n"])  # 501 characters, 1,002 bytes


async def test_an_event_over_the_limit_is_refused_before_it_is_kept_whole() -> None:
    many_lines = [b"event: big\n", *([b"data: " + b"x" * 90 + b"\n"] * 20)]
    with pytest.raises(EventTooLarge, match="over 1000 bytes"):
        await events(many_lines)


async def test_a_line_that_never_ends_is_refused_at_the_limit() -> None:
    with pytest.raises(EventTooLarge, match="line of over 1000 bytes"):
        await events([b"data: " + b"y" * 600, b"y" * 600])


async def test_text_that_is_not_utf8_is_replaced_never_raised() -> None:
    assert await events([b"data: caf\xe9\n\n"]) == [StreamEvent("message", "caf\ufffd")]
