"""Server-sent events read from a byte stream: the engine's live stream, as its client sees it.

The engine writes ``event: KIND`` and one ``data:`` line per event, and ``:`` comments as
keepalives (stream_client.py); this reads the format as the HTML standard defines it (any
line ending, several ``data:`` lines joined, a field without a colon, the one space after
it dropped), so nothing the engine may write is misread. What one event may hold is bounded
as it is read: an event over ``limit`` bytes is an error before it is kept whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import NamedTuple


class StreamEvent(NamedTuple):
    """One event of the stream: its kind (``message`` when none is named) and its data. (A
    tuple: one is made per event read, and none of our records' class-making at the first.)"""

    event: str
    data: str


class EventTooLarge(ValueError):
    """An event (or a line of one) longer than the reader's limit."""


async def read_events(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[StreamEvent]:
    """The events of ``chunks`` (UTF-8) in order; EventTooLarge when one's data passes ``limit``
    bytes, or a line passes it before it ends. Linear in the bytes read, however they are cut:
    each read is split once, and an unfinished line only grows."""
    pending = bytearray()  # the line not ended yet
    held = b""  # a CR last in the read before: half of a CRLF, maybe
    kind = ""
    data: list[str] = []
    size = 0
    async for chunk in chunks:
        text, held = held + chunk, b""
        if text.endswith(b"\r"):
            text, held = text[:-1], b"\r"
        if b"\r" in text:
            text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in text:
            pending += text
            if len(pending) + len(held) > limit + LINE_SLACK:
                raise EventTooLarge(f"a stream line of over {limit} bytes")
            continue
        first, *lines, rest = text.split(b"\n")
        pending += first
        for line in (bytes(pending), *lines):
            if not line:  # a blank line dispatches the event read so far
                if data:
                    yield StreamEvent(kind or "message", "\n".join(data))
                kind, data, size = "", [], 0
                continue
            field, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                size += len(value) + (1 if data else 0)  # the data lines joined by newlines
                if size > limit:
                    raise EventTooLarge(f"a stream event of over {limit} bytes")
                data.append(value.decode("utf-8", "replace"))
            elif field == b"event":
                kind = value.decode("utf-8", "replace")
            # "" (a comment: a keepalive), "id", "retry" and unknown fields: nothing to keep
        pending = bytearray(rest)
        if len(pending) > limit + LINE_SLACK:
            raise EventTooLarge(f"a stream line of over {limit} bytes")


LINE_SLACK = len("data: \r")
"""What an unfinished line holds besides its value (its field, and a CR that may start a CRLF):
the line of a data field at the limit is not refused."""
