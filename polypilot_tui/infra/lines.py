"""Reading a file line by line with a bound: a line too long is never held whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

SKIP_CHUNK = 1 << 20
"""Bytes read at a time of the rest of a line too long (read and dropped)."""


def bounded_lines(file: BinaryIO, limit: int) -> Iterator[tuple[bytes, bool]]:
    """The file's lines (newline kept), each with whether it was cut: a line of more than
    ``limit`` bytes is given as its first ``limit``, the rest of it read and dropped."""
    while line := file.readline(limit):
        cut = False
        if len(line) == limit and not line.endswith(b"\n"):
            while more := file.readline(SKIP_CHUNK):
                cut = True
                if more.endswith(b"\n"):
                    break
        yield line, cut
