"""A session's chat rows by index, with the rows saved before a restart read only when needed.

A restore used to read every saved row of every session before the first frame (10,000 rows
for 200 sessions cost ~80 ms). Here a restored session knows only how many rows it saved;
the first look at a row reads it and the rows just above it from disk, from the end
backwards a page at a time (the chat pane shows the last rows first), and a walk over the
whole history reads what is left in one go. Indexes are the rows' indexes on disk, so rows
added since the restore are written where they belong, whatever has been read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

from polypilot_tui.domain.chat import ChatItem, ItemKind

ReadRows = Callable[[int, int], "list[ChatItem] | None"]
"""Saved rows ``start <= index < stop`` in order, exactly that many (None: not readable now)."""

PAGE = 200
"""Saved rows read at least at once when reading backwards (one query, about a millisecond)."""

UNREADABLE = ChatItem(ItemKind.ERROR, "(this saved row could not be read from history.db)", 0.0)
"""What a saved row shows while it cannot be read; it is not kept: a later try reads the row."""


class History(Sequence[ChatItem]):
    """Chat rows ``0 .. len-1``: rows below :attr:`unread` are still on disk, the rest here."""

    __slots__ = ("_broken", "_read", "_rows", "_unread")

    def __init__(self, rows: Iterable[ChatItem] = (), *, saved: int = 0, read: ReadRows | None = None) -> None:
        """``rows`` held now; with ``read``, ``saved`` rows on disk come before them."""
        self._rows = list(rows)
        self._unread = saved if read is not None else 0
        self._read = read
        self._broken = False

    @property
    def unread(self) -> int:
        """How many rows, from index 0, have not been read from disk yet."""
        return self._unread

    @property
    def broken(self) -> bool:
        """The last read failed: looks show :data:`UNREADABLE` without touching the disk until
        :meth:`read_more` or :meth:`read_all` tries again (one failing file must not cost a
        query per row shown, per redraw)."""
        return self._broken

    def __len__(self) -> int:
        return self._unread + len(self._rows)

    @overload
    def __getitem__(self, index: int) -> ChatItem: ...

    @overload
    def __getitem__(self, index: slice) -> list[ChatItem]: ...

    def __getitem__(self, index: int | slice) -> ChatItem | list[ChatItem]:
        if isinstance(index, slice):
            positions = range(*index.indices(len(self)))
            if positions:
                self._read_from(min(positions[0], positions[-1]))
            return [self[i] for i in positions]
        position = self._position(index)
        self._read_from(position)
        if position < self._unread:
            return UNREADABLE
        return self._rows[position - self._unread]

    def __setitem__(self, index: int, item: ChatItem) -> None:
        position = self._position(index)
        self._read_from(position)
        if position < self._unread:
            raise IndexError(f"history row {position} could not be read: it cannot be replaced")
        self._rows[position - self._unread] = item

    def __iter__(self) -> Iterator[ChatItem]:
        self._read_from(0)
        if not self._unread:
            return iter(self._rows)
        return (self[i] for i in range(len(self)))

    def __reversed__(self) -> Iterator[ChatItem]:
        """Newest first, reading saved rows a page at a time only as far as the caller goes."""
        for index in range(len(self) - 1, -1, -1):
            yield self[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (History, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"History({len(self)} rows, {self._unread} unread)"

    def append(self, item: ChatItem) -> None:
        """Add a row at index ``len(self)`` (nothing is read for it)."""
        self._rows.append(item)

    def held(self) -> Iterator[tuple[int, ChatItem]]:
        """(index, row) of the rows in memory, without reading any."""
        for offset, item in enumerate(self._rows):
            yield self._unread + offset, item

    def read_more(self) -> bool:
        """Read the page of saved rows just above the held ones (False: no progress — nothing
        was left, or the disk could not be read now)."""
        before = self._unread
        if before:
            self._read_from(before - 1, retry=True)
        return self._unread < before

    def read_all(self) -> bool:
        """Read every saved row now, trying again if a read failed (False: some could not be read)."""
        self._read_from(0, retry=True)
        return not self._unread

    def _position(self, index: int) -> int:
        """``index`` from 0 (a negative one counts from the end), or IndexError, as a list says."""
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            raise IndexError("history index out of range")
        return position

    def _read_from(self, position: int, retry: bool = False) -> None:
        """Make rows ``position ..`` held, reading a page or more below what is held already."""
        if position >= self._unread or self._read is None or (self._broken and not retry):
            return
        start = max(0, min(position, self._unread - PAGE)) if position else 0
        rows = self._read(start, self._unread)
        # A short read is a file that lost rows (replaced underneath): taking it would shift
        # every later index, so it counts as a failure too.
        self._broken = rows is None or len(rows) != self._unread - start
        if rows is None or self._broken:
            return
        self._rows[:0] = rows
        self._unread = start
        if not start:
            self._read = None
