"""The safety net under "nothing the agent wrote is dropped".

Markdown syntax may disappear when drawn (``**``, ``#``, ``|``), but every letter and digit
of a block must reach the screen, in order. markdown-it silently drops what is nested
deeper than its limit (``>>>>…`` twenty times, ``~~`` sixty times); a parser upgrade could
drop something else. A block whose letters and digits are not all drawn is shown as its
raw source text instead, which is verbatim by definition.
"""

from __future__ import annotations

import re

_ENTITY = re.compile(r"&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
"""``&amp;`` draws as ``&``: its letters are syntax, not text."""
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
"""A link address is drawn decoded (``a%20b`` as ``a b``)."""
_MARKER = re.compile(r"\d{1,9}[.)](?=\s|$)")
"""Ordered-list numbers are redrawn in sequence, so numbers ending in "." or ")" are not compared."""
_NOT_WORD = re.compile(r"[\W_]+")


def signature(text: str) -> str:
    """The letters and digits of ``text``, in order (list numbers and %-escapes left out)."""
    return _NOT_WORD.sub("", _MARKER.sub("", _PERCENT.sub("", text)))


def kept(source: str, drawn: str) -> bool:
    """Whether every letter and digit of ``source`` is in ``drawn``, in order (more may be drawn)."""
    want = signature(_ENTITY.sub("", source))
    have = signature(drawn)
    if want == have or want in have:
        return True
    rest = iter(have)
    return all(char in rest for char in want)  # a subsequence: drawing may add words ("image: …")
