"""What a session changed in its folder, as data: files, hunks, lines, and review comments.

The workspace layer fills these from ``git diff``; the diff view draws them; a review turns
comments on them into one prompt for the session's agent. Nothing here runs git.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import field
from enum import StrEnum
from typing import overload

from polypilot_tui.domain.dataclass_on_use import dataclass


class FileStatus(StrEnum):
    """How a file changed against the base."""

    ADDED = "added"
    MODIFIED = "modified"
    DELETED = "deleted"
    RENAMED = "renamed"
    UNTRACKED = "untracked"
    """New and not yet added to git: shown like an added file."""


class LineKind(StrEnum):
    """One line of a hunk."""

    CONTEXT = " "
    ADDED = "+"
    REMOVED = "-"
    NOTE = "\\"
    """``\\ No newline at end of file``."""


@dataclass(frozen=True, slots=True)
class DiffLine:
    """A line of a hunk with its numbers in the old and the new file (None where it has none)."""

    kind: LineKind
    text: str
    """The line as in the file, without its newline (not escaped: the view escapes)."""
    old_no: int | None = None
    new_no: int | None = None


_KINDS = {kind.value: kind for kind in LineKind}


def _diff_line(kind: str, text: str, old_no: int | None, new_no: int | None) -> DiffLine:
    """The line of these column values (``kind``: a :class:`LineKind`'s value)."""
    return DiffLine(_KINDS[kind], text, old_no, new_no)


class HunkLines(Sequence[DiffLine]):
    """A hunk's lines, kept as columns: each line's kind (a character of ``kinds``: the
    :class:`LineKind`'s value), text and numbers; a :class:`DiffLine` is made when a line is read.

    Why columns: a string and tuples of strings and numbers are nothing the garbage collector
    walks (it stops tracking such a tuple the first time it sees it), while a DiffLine object
    is walked by every full collection for as long as the diff is shown: a 20,000-line diff
    was 20,000 of them, walked again and again while the user scrolled it."""

    __slots__ = ("kinds", "texts", "old_nos", "new_nos")

    kinds: str
    texts: tuple[str, ...]
    old_nos: tuple[int | None, ...]
    new_nos: tuple[int | None, ...]

    def __init__(
        self,
        kinds: str = "",
        texts: Sequence[str] = (),
        old_nos: Sequence[int | None] = (),
        new_nos: Sequence[int | None] = (),
    ) -> None:
        """The lines whose kinds, texts and numbers these are, line by line (a parser's way;
        :meth:`of` makes them of DiffLines)."""
        if not len(kinds) == len(texts) == len(old_nos) == len(new_nos):
            raise ValueError("a hunk's columns must be as long as each other")
        if not set(kinds) <= _KINDS.keys():
            raise ValueError(f"a line's kind is one of {''.join(_KINDS)!r}")
        self.kinds, self.texts, self.old_nos, self.new_nos = kinds, tuple(texts), tuple(old_nos), tuple(new_nos)

    @classmethod
    def of(cls, lines: Iterable[DiffLine]) -> HunkLines:
        """These lines, kept as columns."""
        lines = tuple(lines)
        return cls(
            "".join(line.kind.value for line in lines),
            tuple(line.text for line in lines),
            tuple(line.old_no for line in lines),
            tuple(line.new_no for line in lines),
        )

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, name):  # a frozen Hunk is hashed by them: set once, by __init__
            raise AttributeError(f"a hunk's lines are read-only: {name}")
        object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return len(self.kinds)

    def line(self, index: int) -> DiffLine:
        """Line ``index`` (negative counts from the end)."""
        return _diff_line(self.kinds[index], self.texts[index], self.old_nos[index], self.new_nos[index])

    @overload
    def __getitem__(self, index: int) -> DiffLine: ...

    @overload
    def __getitem__(self, index: slice) -> HunkLines: ...

    def __getitem__(self, index: int | slice) -> DiffLine | HunkLines:
        if isinstance(index, slice):
            return HunkLines(self.kinds[index], self.texts[index], self.old_nos[index], self.new_nos[index])
        return self.line(index)

    def __iter__(self) -> Iterator[DiffLine]:
        # the columns walked together (as long as each other: __init__ checked), faster than
        # line() index by index (~10.7 against ~12.3 ms for 20,000 lines)
        return map(_diff_line, self.kinds, self.texts, self.old_nos, self.new_nos)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HunkLines):
            return NotImplemented
        return (self.kinds, self.texts, self.old_nos, self.new_nos) == (
            other.kinds,
            other.texts,
            other.old_nos,
            other.new_nos,
        )

    def __hash__(self) -> int:
        return hash((self.kinds, self.texts, self.old_nos, self.new_nos))

    def __repr__(self) -> str:
        return f"HunkLines({tuple(self)!r})"


@dataclass(frozen=True)
class Hunk:
    """One ``@@ -a,b +c,d @@`` block."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    section: str = ""
    """What git names after the second ``@@`` (the enclosing function, often)."""
    lines: HunkLines = HunkLines()

    @property
    def header(self) -> str:
        tail = f" {self.section}" if self.section else ""
        return f"@@ -{self.old_start},{self.old_count} +{self.new_start},{self.new_count} @@{tail}"


@dataclass(frozen=True)
class FileDiff:
    """One changed file. ``path`` is the new path (the old one for a deletion)."""

    path: str
    status: FileStatus
    added: int = 0
    removed: int = 0
    old_path: str = ""
    """For a rename: where it came from."""
    binary: bool = False
    """A binary file: its stats and status only, no hunks."""
    omitted: str = ""
    """Why the hunks are not shown although the file changed (too large, unreadable), or ""."""
    hunks: tuple[Hunk, ...] = ()


@dataclass(frozen=True, slots=True)
class ChangeStats:
    """The sidebar's summary: files changed, lines added and removed."""

    files: int = 0
    added: int = 0
    removed: int = 0

    def __bool__(self) -> bool:
        return self.files > 0

    def short(self) -> str:
        """``3 files +120 −4`` (a typographic minus, as diff tools show it)."""
        noun = "file" if self.files == 1 else "files"
        return f"{self.files} {noun} +{self.added} \u2212{self.removed}"


@dataclass(frozen=True, slots=True)
class FileCount:
    """One changed file's line counts (``binary`` files have none)."""

    path: str
    added: int
    removed: int
    binary: bool = False
    untracked: bool = False


@dataclass(frozen=True)
class Changeset:
    """A session's changes against its base: committed, uncommitted and untracked together."""

    base: str
    """What the changes are measured against (a commit id, or ``HEAD`` in a plain checkout)."""
    files: tuple[FileDiff, ...] = ()

    @property
    def stats(self) -> ChangeStats:
        return ChangeStats(len(self.files), sum(f.added for f in self.files), sum(f.removed for f in self.files))


class Side(StrEnum):
    """Which file a review comment's line number counts in."""

    NEW = "new"
    OLD = "old"


@dataclass(frozen=True)
class ReviewComment:
    """A remark on a line (or a range of lines) of a diff, for the session's agent."""

    path: str
    line: int
    text: str
    side: Side = Side.NEW
    end_line: int | None = None
    """The last line of a range (a hunk), or None for one line."""
    quote: tuple[str, ...] = field(default=())
    """The commented lines as they read, so the agent sees what was meant even if they moved."""

    @property
    def where(self) -> str:
        span = f"{self.line}-{self.end_line}" if self.end_line and self.end_line != self.line else str(self.line)
        removed = " (a removed line)" if self.side is Side.OLD else ""
        return f"{self.path}:{span}{removed}"


MAX_QUOTE_LINES = 6


REVIEW_OPENING = "Review of your changes: "
"""How every review prompt begins (:func:`is_review_prompt` knows one by it)."""


def is_review_prompt(text: str) -> bool:
    """Whether ``text`` is a prompt :func:`review_prompt` wrote (comments on the work, not a task)."""
    head = text.strip().split("\n", 1)[0]
    return head.startswith(REVIEW_OPENING) and head.endswith("Please address each one.")


def review_prompt(comments: Sequence[ReviewComment]) -> str:
    """All comments as one prompt, in file and line order, each with its ``file:line``."""
    if not comments:
        raise ValueError("a review needs at least one comment")
    ordered = sorted(comments, key=lambda c: (c.path, c.line, c.side != Side.NEW))
    parts = [f"{REVIEW_OPENING}{len(ordered)} comment{'s' if len(ordered) != 1 else ''}. Please address each one."]
    for number, comment in enumerate(ordered, 1):
        lines = [f"{number}. {comment.where}"]
        quote = comment.quote[:MAX_QUOTE_LINES]
        lines += [f"   > {text}" for text in quote]
        if len(comment.quote) > MAX_QUOTE_LINES:
            lines.append(f"   > … ({len(comment.quote) - MAX_QUOTE_LINES} more lines)")
        lines += [f"   {text}" for text in comment.text.strip().splitlines()]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
