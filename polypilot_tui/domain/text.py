"""Agent text is untrusted: strip terminal control sequences before it is stored or shown.

Rich markup escaping happens at render time in the UI; this module only removes bytes a
terminal would act on (CSI/OSC/DCS sequences, C0/C1 controls other than newline and tab)
and bounds what one line may cost to draw.
"""

from __future__ import annotations

import re

# ESC [ ... final byte | ESC ] ... (BEL | ESC \) | ESC P/X/^/_ ... ESC \ | two-byte ESC sequences
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

MAX_LINE_CHARS = 4000
"""Longest line the UI draws; the rest is elided with a note (the stored text keeps it all)."""


def strip_control(text: str) -> str:
    """Remove terminal escape sequences and control characters; keep newlines and tabs."""
    if not text:
        return text
    text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text)


def bound_lines(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """Cut every line longer than ``limit`` and say how much was cut."""
    if len(text) <= limit:
        return text
    out = []
    for line in text.split("\n"):
        if len(line) > limit:
            line = f"{line[:limit]} … [{len(line) - limit:,} more characters]"
        out.append(line)
    return "\n".join(out)


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, the cut marked by "…" right where it is:
    the redactor reads a "…" as a cut, and removes the start of a secret cut through there."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def one_line(text: str, limit: int = 80) -> str:
    """A single-line preview of ``text`` at most ``limit`` characters long, read from its start
    only (an agent's label of megabytes costs no more than a short one)."""
    head = text if len(text) <= 4 * limit + 64 else text[: 4 * limit + 64]
    flat = " ".join(strip_control(head).split())
    if head is not text and len(flat) < limit:  # more came after the part read: said
        return flat + "…"
    return clip(flat, limit)


def compact_duration(seconds: float) -> str:
    """``45s``, ``2m``, ``3h``, ``2d``: one unit, rounded down."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"
