"""A changeset laid out as a flat list of rows, unified or side by side, with comments placed.

The diff view draws row ``y`` by indexing this list: building it costs one pass over the
changeset, and drawing any line afterwards costs the same in a 10-line diff as in a
100,000-line one. Pure data: no Textual here, so the layout is tested on its own.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import NamedTuple, overload

from polypilot_tui.domain.changeset import Changeset, DiffLine, FileDiff, Hunk, HunkLines, LineKind, ReviewComment, Side
from polypilot_tui.domain.dataclass_on_use import dataclass


class RowKind(Enum):
    FILE = "file"
    """A file's header: status, path, stats."""
    INFO = "info"
    """Why a file shows no lines (binary, too large, unreadable)."""
    HUNK = "hunk"
    LINE = "line"
    """A diff line (unified) or a pair of them, old left and new right (split)."""
    NOTE = "note"
    """``\\ No newline at end of file``."""
    COMMENT = "comment"
    """One line of a review comment's text, under what it comments."""


class Row(NamedTuple):
    """One row of the layout (a named tuple: immutable, and a fifth of a frozen dataclass's
    cost to make, which counts at one per diff line when the view opens)."""

    kind: RowKind
    file: int
    hunk: int = -1
    left: DiffLine | None = None
    """Unified: the line. Split: the old side (removed or context), or None."""
    right: DiffLine | None = None
    """Split only: the new side (added or context), or None."""
    comment: int = -1
    """The comment (an index into the list given) this row shows, or that the line carries
    (on a split row with comments on both sides: the new side's, as :func:`comment_anchor`)."""
    carried: tuple[int, ...] = ()
    """Every comment a line row carries (a split row may carry one on each side)."""
    text: str = ""
    """A comment row's line of text, or an info row's reason."""
    first: bool = False
    """The first row of a comment (it carries the mark)."""


class _Run:
    """A hunk's line rows where no comment falls: one row per line (or pair), made when read."""

    __slots__ = ("file", "hunk", "lines", "split", "length", "_paired")

    def __init__(self, file: int, hunk: int, lines: HunkLines, *, split: bool) -> None:
        self.file, self.hunk, self.lines, self.split = file, hunk, lines, split
        self.length = _pair_count(lines.kinds) if split else len(lines)
        self._paired: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        """Split: each row's left and right line, as indices (plain numbers: nothing the
        garbage collector walks, where pairs of line objects were a tracked tuple a row)."""

    def row(self, index: int) -> Row:
        if not self.split:
            line = self.lines.line(index)
            return Row(RowKind.NOTE if line.kind is LineKind.NOTE else RowKind.LINE, self.file, self.hunk, line)
        if self._paired is None:
            self._paired = _pair_indices(self.lines.kinds)
        left, right = _pair_at(self.lines, self._paired[0][index], self._paired[1][index])
        if left is not None and left.kind is LineKind.NOTE:
            return Row(RowKind.NOTE, self.file, self.hunk, left)
        return Row(RowKind.LINE, self.file, self.hunk, left, right)


class Rows(Sequence[Row]):
    """A layout's rows. Most of a big diff's rows are plain line rows (no comment on their
    file): those are kept as one run per hunk and made when read, so laying out 20,000 lines
    makes a few dozen objects, not 20,000 the garbage collector then walks on every pass."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._parts: list[Row | _Run] = []
        self._length = 0

    def append(self, row: Row) -> None:
        self._starts.append(self._length)
        self._parts.append(row)
        self._length += 1

    def extend(self, rows: Iterable[Row]) -> None:
        for row in rows:
            self.append(row)

    def add_run(self, run: _Run) -> None:
        if run.length:
            self._starts.append(self._length)
            self._parts.append(run)
            self._length += run.length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        part = bisect_right(self._starts, index) - 1
        found = self._parts[part]
        return found.row(index - self._starts[part]) if isinstance(found, _Run) else found


@dataclass(frozen=True, slots=True)
class Layout:
    rows: Rows
    file_rows: tuple[int, ...]
    """Where each file's header row is."""
    number_width: int
    """Cells for a line number: the widest number in the changeset."""


def hunk_anchor(path: str, hunk: Hunk) -> tuple[Side, int, int]:
    """Where a comment on a whole hunk points: its new lines, or its old ones if it has none."""
    if hunk.new_count:
        return Side.NEW, hunk.new_start, hunk.new_start + hunk.new_count - 1
    return Side.OLD, hunk.old_start, hunk.old_start + max(hunk.old_count, 1) - 1


_REMOVED, _ADDED, _CONTEXT = LineKind.REMOVED.value, LineKind.ADDED.value, LineKind.CONTEXT.value


def _pair_count(kinds: str) -> int:
    """How many rows :func:`_pair_indices` makes of lines of these kinds (without making them)."""
    count = removed = added = 0
    for kind in kinds:
        if kind == _REMOVED:
            if added:
                count, removed, added = count + max(removed, added), 0, 0
            removed += 1
        elif kind == _ADDED:
            added += 1
        else:
            count, removed, added = count + max(removed, added) + 1, 0, 0
    return count + max(removed, added)


def _pair_indices(kinds: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Lines side by side, as each row's left and right line index (-1: none): context on both
    sides; in a change block, removed i next to added i; a note on its own on the left."""
    lefts: list[int] = []
    rights: list[int] = []
    removed: list[int] = []
    added: list[int] = []

    def flush() -> None:
        for i in range(max(len(removed), len(added))):
            lefts.append(removed[i] if i < len(removed) else -1)
            rights.append(added[i] if i < len(added) else -1)
        removed.clear()
        added.clear()

    for index, kind in enumerate(kinds):
        if kind == _REMOVED:
            if added:  # a removal after additions starts a new block
                flush()
            removed.append(index)
        elif kind == _ADDED:
            added.append(index)
        else:
            flush()
            lefts.append(index)
            rights.append(index if kind == _CONTEXT else -1)
    flush()
    return tuple(lefts), tuple(rights)


def _pair_at(lines: HunkLines, left: int, right: int) -> tuple[DiffLine | None, DiffLine | None]:
    """The lines at these indices (-1: none); a context line is the same object on both sides."""
    old = lines.line(left) if left >= 0 else None
    new = old if right == left else lines.line(right) if right >= 0 else None
    return old, new


def _pairs(lines: HunkLines) -> list[tuple[DiffLine | None, DiffLine | None]]:
    """Every row's lines side by side (see :func:`_pair_indices`)."""
    return [_pair_at(lines, left, right) for left, right in zip(*_pair_indices(lines.kinds), strict=True)]


class _Placer:
    """Comments by where they point, handed out as rows as the layout meets those places."""

    def __init__(self, comments: Sequence[ReviewComment]) -> None:
        self.lines: dict[tuple[str, Side, int], list[int]] = defaultdict(list)
        self.ranges: dict[tuple[str, Side, int, int], list[int]] = defaultdict(list)
        self.by_path: dict[str, list[int]] = defaultdict(list)
        self.placed: set[int] = set()
        self.comments = comments
        for i, comment in enumerate(comments):
            self.by_path[comment.path].append(i)
            if comment.end_line is not None:
                self.ranges[(comment.path, comment.side, comment.line, comment.end_line)].append(i)
            else:
                self.lines[(comment.path, comment.side, comment.line)].append(i)

    def for_line(self, path: str, line: DiffLine | None) -> list[int]:
        if line is None or line.kind is LineKind.NOTE:
            return []
        if line.kind is LineKind.REMOVED:
            key = (path, Side.OLD, line.old_no or 0)
        else:
            key = (path, Side.NEW, line.new_no or 0)
        return self.lines.get(key, [])

    def rows(self, indices: Sequence[int], file: int, hunk: int, prefix: str = "") -> list[Row]:
        out: list[Row] = []
        for i in indices:
            if i in self.placed:
                continue
            self.placed.add(i)
            text = self.comments[i].text.strip() or "(empty comment)"
            for n, part in enumerate((prefix + text).split("\n")):
                out.append(Row(RowKind.COMMENT, file, hunk, comment=i, text=part, first=n == 0))
        return out


def layout(changes: Changeset, comments: Sequence[ReviewComment], *, split: bool) -> Layout:
    """Every row of ``changes``, comments placed under the line or hunk they point at."""
    placer = _Placer(comments)
    rows = Rows()
    file_rows: list[int] = []
    widest = 1
    for f, diff in enumerate(changes.files):
        file_rows.append(len(rows))
        rows.append(Row(RowKind.FILE, f))
        reason = "binary file: no lines to show" if diff.binary else diff.omitted
        if reason:
            rows.append(Row(RowKind.INFO, f, text=reason))
        for h, hunk in enumerate(diff.hunks):
            widest = max(widest, hunk.old_start + hunk.old_count, hunk.new_start + hunk.new_count)
            side, start, end = hunk_anchor(diff.path, hunk)
            rows.append(Row(RowKind.HUNK, f, h))
            rows.extend(placer.rows(placer.ranges.get((diff.path, side, start, end), []), f, h))
            _hunk_rows(rows, placer, diff, f, h, split=split)
        stale = [i for i in placer.by_path.get(diff.path, []) if i not in placer.placed]
        rows.extend(placer.rows(stale, f, -1, prefix="(no longer in the diff) "))
    return Layout(rows, tuple(file_rows), len(str(widest)))


def _hunk_rows(rows: Rows, placer: _Placer, diff: FileDiff, f: int, h: int, *, split: bool) -> None:
    path = diff.path
    lines = diff.hunks[h].lines
    if path not in placer.by_path:  # no comment on this file: one row per line (or pair), nothing else
        rows.add_run(_Run(f, h, lines, split=split))
        return
    if not split:
        for line in lines:
            mine = placer.for_line(path, line)
            kind = RowKind.NOTE if line.kind is LineKind.NOTE else RowKind.LINE
            rows.append(Row(kind, f, h, left=line, comment=mine[0] if mine else -1, carried=tuple(mine)))
            rows.extend(placer.rows(mine, f, h))
        return
    for left, right in _pairs(lines):
        if left is not None and left.kind is LineKind.NOTE:
            rows.append(Row(RowKind.NOTE, f, h, left=left))
            continue
        # The new side first: a key on this row means its new line (comment_anchor).
        mine = (placer.for_line(path, right) if right is not left else []) + placer.for_line(path, left)
        rows.append(
            Row(RowKind.LINE, f, h, left=left, right=right, comment=mine[0] if mine else -1, carried=tuple(mine))
        )
        rows.extend(placer.rows(mine, f, h))


def comment_anchor(changes: Changeset, row: Row) -> ReviewComment | None:
    """A comment (without text yet) on what ``row`` shows: its line, or its whole hunk.

    On a split row with both sides the new line is meant: that is the code that stays.
    None for rows that are no line of code (file headers, notes, comments).
    """
    if row.kind not in (RowKind.LINE, RowKind.HUNK) or row.file >= len(changes.files):
        return None
    diff = changes.files[row.file]
    hunk = diff.hunks[row.hunk]
    if row.kind is RowKind.HUNK:
        side, start, end = hunk_anchor(diff.path, hunk)
        wanted = LineKind.ADDED if side is Side.NEW else LineKind.REMOVED
        quote = tuple(line.text for line in hunk.lines if line.kind in (wanted, LineKind.CONTEXT))
        return ReviewComment(diff.path, start, "", side, end_line=end, quote=quote)
    line = row.right if row.right is not None else row.left
    if line is None or line.kind is LineKind.NOTE:
        return None
    if line.kind is LineKind.REMOVED:
        return ReviewComment(diff.path, line.old_no or 0, "", Side.OLD, quote=(line.text,))
    return ReviewComment(diff.path, line.new_no or 0, "", Side.NEW, quote=(line.text,))


def comment_at(changes: Changeset, comments: Sequence[ReviewComment], row: Row) -> int | None:
    """The comment a row shows or carries (a hunk header: the comment on the whole hunk)."""
    if row.comment >= 0:
        return row.comment
    if row.kind is RowKind.HUNK:
        anchor = comment_anchor(changes, row)
        for i, comment in enumerate(comments):
            if anchor is not None and (comment.path, comment.side, comment.line, comment.end_line) == (
                anchor.path,
                anchor.side,
                anchor.line,
                anchor.end_line,
            ):
                return i
    return None
