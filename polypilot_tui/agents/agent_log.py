"""Reading an agent's own event log (``events.jsonl``) from disk: its tail and a cheap stat.

Only the last ``max_bytes`` of the file are ever read, through a non-blocking descriptor so a
FIFO at that path cannot hang the loop; what the bytes mean is
:mod:`polypilot_tui.domain.eventlog`'s business.
"""

from __future__ import annotations

import os
import stat as stat_mod
from pathlib import Path
from typing import Any

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.eventlog import last_event_type, parse_window


def read_tail(path: Path, max_lines: int = 30, max_bytes: int = 65536) -> list[dict[str, Any]]:
    """The last ``max_lines`` events (oldest first) found in the last ``max_bytes`` of ``path``.

    A missing or unreadable file gives ``[]``.
    """
    if max_lines <= 0 or max_bytes <= 0:
        return []
    try:
        # O_NONBLOCK so a FIFO at that path cannot hang the UI; only regular files are read.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):
        return []
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            return []
        end = os.lseek(fd, 0, os.SEEK_END)
        start = max(0, end - max_bytes)
        # One probe byte before `start` tells whether we begin on a line boundary;
        # it is always discarded by the parser, so at most max_bytes are parsed.
        probe = max(0, start - 1)
        os.lseek(fd, probe, os.SEEK_SET)
        chunk = _read_upto(fd, end - probe)
    except OSError:
        return []
    finally:
        os.close(fd)  # raw fd: directories and FIFOs must not leak one
    return parse_window(chunk, start == 0, max_lines)


def _read_upto(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes (fewer if the file shrank while we read)."""
    parts: list[bytes] = []
    while size > 0:
        part = os.read(fd, size)
        if not part:
            break
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


@dataclass(frozen=True)
class LogStat:
    """A cheap snapshot of a log: size (for growth checks), age, last event type."""

    size: int
    age: float
    last_type: str | None


def stat_log(path: Path, now_wall: float, tail_bytes: int = 8192) -> LogStat | None:
    """Stat ``path`` and read its last event type from a small tail; None if missing."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    # The last line is normally well under 8 KiB; a larger one gives last_type None
    # rather than a big read on every watchdog tick.
    last = last_event_type(read_tail(path, max_lines=1, max_bytes=tail_bytes))
    return LogStat(size=st.st_size, age=max(0.0, now_wall - st.st_mtime), last_type=last)
