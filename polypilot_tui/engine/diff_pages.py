"""A session's diff in pages: read once where the engine runs, sent a page of text at a time.

A diff may hold tens of megabytes (``MAX_DIFF_CHARS``), more than one answer should. The
engine reads it once — a *reading* — and answers it in pages of at most
:data:`~polypilot_tui.engine.verbs.DIFF_PAGE` characters (:class:`DiffReadings`); a reading is
kept until its last page is asked for, and at most :data:`MAX_READINGS` are kept at a time
(an abandoned one is forgotten when newer ones come). Pages of one reading all show the same
diff, even while the agent goes on writing. A front end asks for the pages in order and puts
the text back together (:func:`read_diff`), the same way in this process and over a socket.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from typing import Protocol, TypeVar

from polypilot_tui.domain.changeset import Changeset
from polypilot_tui.engine.api import BadRequest, EngineError, ReadingGone, Verb
from polypilot_tui.engine.verbs import DIFF, DIFF_PAGE, DiffPage, DiffRange
from polypilot_tui.workspace.changes import DiffText, parse_changes

MAX_READINGS = 4
"""Readings kept at once (a diff view and a ``polypilot diff`` or two, reading side by side)."""
Q = TypeVar("Q")
R = TypeVar("R")


class DiffReadings:
    """The diffs being read, by reading id: each one's pages, until its last is asked for."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, tuple[str, DiffText]] = OrderedDict()
        self._ids = itertools.count(1)

    def keep(self, session_id: str, diff: DiffText) -> str:
        """A new reading of ``diff`` (the oldest reading goes when too many are kept)."""
        reading = str(next(self._ids))
        self._kept[reading] = (session_id, diff)
        while len(self._kept) > MAX_READINGS:
            self._kept.popitem(last=False)
        return reading

    def page(self, session_id: str, reading: str, start: int) -> DiffPage:
        """The page of ``reading`` from ``start``; the reading is forgotten after its last page."""
        kept = self._kept.get(reading)
        if kept is None or kept[0] != session_id:
            raise ReadingGone("that reading of the diff is no longer kept: read it again from the start")
        diff = kept[1]
        total = len(diff.text)
        if not 0 <= start <= total:
            raise BadRequest(f"start must be between 0 and {total}")
        end = min(start + DIFF_PAGE, total)
        names = tuple(name for name, at in zip(diff.untracked, diff.starts, strict=True) if start <= at < end)
        if end == total:
            del self._kept[reading]
        return DiffPage(reading, start, total, diff.text[start:end], names, diff.base, diff.truncated)


class Caller(Protocol):
    """What asks the engine a verb: an :class:`~polypilot_tui.engine.api.Engine` or the
    service's client."""

    async def call(self, verb: Verb[Q, R], request: Q) -> R: ...


async def read_diff(engine: Caller, session_id: str) -> DiffText:
    """The session's whole diff, page by page (read again once if the engine forgot the reading)."""
    try:
        return await _read(engine, session_id)
    except ReadingGone:  # forgotten for newer readings: once more, then it is said
        return await _read(engine, session_id)


async def _read(engine: Caller, session_id: str) -> DiffText:
    page = await engine.call(DIFF, DiffRange(session_id))
    first = page
    parts, names = [page.text], [*page.untracked]
    size = len(page.text)
    while size < page.total:
        page = await engine.call(DIFF, DiffRange(session_id, size, first.reading))
        if not page.text:
            raise EngineError(f"the engine's diff ended at {size} of {page.total} characters")
        names += page.untracked
        parts.append(page.text)
        size += len(page.text)
    return DiffText("".join(parts), first.truncated, tuple(names), first.base)


async def read_changeset(engine: Caller, session_id: str) -> tuple[Changeset, bool]:
    """The session's changes parsed for the diff view (parsed off the event loop), and whether
    the diff was cut."""
    diff = await read_diff(engine, session_id)
    return await asyncio.to_thread(parse_changes, diff), diff.truncated
