"""Server-sent events read from a byte stream: the engine's live stream, as its client sees it.

The engine writes ``event: KIND`` and one ``data:`` line per event, and ``:`` comments as
keepalives (stream_client.py); this reads the format as the HTML standard defines it (any
line ending, several ``data:`` lines joined, a field without a colon, the one space after
it dropped), so nothing the engine may write is misread. What one event may hold is bounded
as it is read: an event over ``limit`` bytes is an error before it is kept whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of the stream: its kind (``message`` when none is named) and its data."""

    event: str
    data: str


class EventTooLarge(ValueError):
    """An event (or a line of one) longer than the reader's limit."""


async def read_events(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[StreamEvent]:
    """The events of ``chunks`` (UTF-8) in order; EventTooLarge when one's data passes ``limit``
    bytes, or a line passes it before it ends. Linear in the bytes read, however they are cut:
    a line is searched once, and only the bytes after what was searched already."""
    pending = bytearray()
    searched = 0  # pending[:searched] holds no line ending (but maybe a CR last: see _next_line)
    kind = ""
    data: list[str] = []
    size = 0
    async for chunk in chunks:
        pending += chunk
        start = 0
        while (found := _next_line(pending, max(start, searched - 1))) is not None:
            line, start = pending[start : found[0]], found[1]
            if not line:  # a blank line dispatches the event read so far
                if data:
                    yield StreamEvent(kind or "message", "\n".join(data))
                kind, data, size = "", [], 0
                continue
            field, _, value = bytes(line).partition(b":")
            value = value.removeprefix(b" ")
            if field == b"event":
                kind = value.decode("utf-8", "replace")
            elif field == b"data":
                size += len(value) + (1 if data else 0)  # the data lines joined by newlines
                if size > limit:
                    raise EventTooLarge(f"a stream event of over {limit} bytes")
                data.append(value.decode("utf-8", "replace"))
            # "" (a comment: a keepalive), "id", "retry" and unknown fields: nothing to keep
        del pending[:start]
        searched = len(pending)
        if searched > limit + LINE_SLACK:
            raise EventTooLarge(f"a stream line of over {limit} bytes")


LINE_SLACK = len("data: \r")
"""What an unfinished line holds besides its value (its field, and a CR that may start a CRLF):
the line of a data field at the limit is not refused."""


def _next_line(buffer: bytearray, start: int) -> tuple[int, int] | None:
    """Where the line searched from ``start`` ends and the next begins (LF, CRLF or CR), or None
    when it is not whole yet (a CR last may be half of a CRLF)."""
    lf = buffer.find(b"\n", start)
    cr = buffer.find(b"\r", start, len(buffer) if lf == -1 else lf)
    if cr == -1:
        return None if lf == -1 else (lf, lf + 1)
    if cr + 1 == len(buffer):
        return None
    return cr, cr + (2 if buffer[cr + 1] == 0x0A else 1)
