"""Prompts queued behind a running turn: each with what the engine needs to know of it
without reading it again (its key, its size as saved, its lines), and what a view shows of it.

A view carries a queued prompt's key, size and first words, never its text: a queue may
hold megabytes, and views travel on every change. The text comes back whole when the user
takes the prompt back (``unqueue``, which names it by its key).
"""

from __future__ import annotations

import hashlib

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.limits import PREVIEW_CHARS, saved_bytes
from polypilot_tui.domain.text import one_line


def prompt_key(text: str) -> str:
    """A short digest that names a prompt's text (equal texts have equal keys)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class QueuedPrompt:
    """One queued prompt, measured once when it is queued."""

    text: str
    key: str
    size: int
    """Bytes as saved (limits.saved_bytes)."""
    lines: int

    @classmethod
    def of(cls, text: str, size: int | None = None) -> QueuedPrompt:
        return cls(text, prompt_key(text), saved_bytes(text) if size is None else size, text.count("\n") + 1)


@dataclass(frozen=True)
class QueueEntry:
    """What a view shows of one queued prompt."""

    key: str
    preview: str
    """Its first words, one line ("" past the first limits.QUEUE_PREVIEWS of a queue)."""
    size: int
    lines: int


def entry(prompt: QueuedPrompt, with_preview: bool = True) -> QueueEntry:
    return QueueEntry(
        prompt.key, one_line(prompt.text, PREVIEW_CHARS) if with_preview else "", prompt.size, prompt.lines
    )


def take_back(queue: list[QueuedPrompt], index: int, key: str | None) -> QueuedPrompt | None:
    """Take the prompt at ``index`` out of ``queue``; with ``key``, the one of that key wherever
    the queue moved it since it was shown (None when it is not queued any more)."""
    if key is not None and not (0 <= index < len(queue) and queue[index].key == key):
        index = next((i for i, p in enumerate(queue) if p.key == key), -1)
    return queue.pop(index) if 0 <= index < len(queue) else None
