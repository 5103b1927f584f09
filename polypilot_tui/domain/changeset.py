"""What a session changed in its folder, as data: files, hunks, lines, and review comments.

The workspace layer fills these from ``git diff``; the diff view draws them; a review turns
comments on them into one prompt for the session's agent. Nothing here runs git.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum


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


@dataclass(frozen=True, slots=True)
class Hunk:
    """One ``@@ -a,b +c,d @@`` block."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    section: str = ""
    """What git names after the second ``@@`` (the enclosing function, often)."""
    lines: tuple[DiffLine, ...] = ()

    @property
    def header(self) -> str:
        tail = f" {self.section}" if self.section else ""
        return f"@@ -{self.old_start},{self.old_count} +{self.new_start},{self.new_count} @@{tail}"


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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
