"""Text that arrives in pieces (a streamed reply, its reasoning), kept up to a limit: what
comes past it is counted, and said where the text ends, never silently dropped. Read whole
as often as it grows (every attached client reads a streaming reply once per view it is
sent), it joins only the pieces that came since the last read onto the text read then: a
re-join of every piece at every read made a reply of 100,000 deltas quadratic."""

from __future__ import annotations

from polypilot_tui.domain.limits import ROW_CHARS, cut_note


class Gathered:
    """The pieces kept so far, at most ``limit`` characters in all."""

    __slots__ = ("_limit", "chars", "dropped", "parts", "changes")

    def __init__(self, limit: int = ROW_CHARS) -> None:
        self._limit = limit
        self.parts: list[str] = []
        self.chars = 0
        self.dropped = 0
        """Characters that came past the limit (not kept)."""
        self.changes = 0
        """Bumped whenever more came or it was taken: "has it moved since I looked"."""

    def __bool__(self) -> bool:
        return bool(self.parts) or self.dropped > 0

    def add(self, text: str) -> None:
        self.changes += 1
        room = self._limit - self.chars
        if len(text) > room:
            self.dropped += len(text) - max(room, 0)
            text = text[: max(room, 0)]
        if text:
            self.parts.append(text)
            self.chars += len(text)

    def lost(self, count: int) -> None:
        """``count`` characters came that were cut before they got here: counted as not kept,
        and nothing after them is kept either (the text is whole up to its first cut)."""
        if count:
            self.changes += 1
            self.dropped += count
            self.chars = self._limit

    def text(self) -> str:
        """What was kept (no marker: the text streaming now), its pieces joined into one."""
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def take(self) -> str:
        """What was kept, with a line saying how much was not; it starts again empty."""
        text, dropped = self.text(), self.dropped
        self.parts, self.chars, self.dropped = [], 0, 0
        self.changes += 1
        return text + cut_note(dropped) if dropped else text
