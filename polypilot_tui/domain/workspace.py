"""Where a session works: its folder, and when it has one, its own git worktree and branch;
what a folder is and what finishing a worktree has to care about, as the engine reports them."""

from __future__ import annotations

import re
from enum import StrEnum

from polypilot_tui.domain.dataclass_on_use import dataclass


class Isolation(StrEnum):
    """How a session shares its repository with the others."""

    FOLDER = "folder"
    """Works in the folder as it is (a plain folder, or the checkout itself)."""
    WORKTREE = "worktree"
    """Works in a worktree of its own, on a branch of its own, made for it."""


@dataclass(frozen=True)
class Workspace:
    """A session's folder; for a worktree also the repository, its branch and its base."""

    folder: str
    """Absolute path the agent runs in."""
    isolation: Isolation = Isolation.FOLDER
    repo: str = ""
    """The repository's main checkout (top level), or "" when the folder is not in git."""
    branch: str = ""
    """The worktree's branch (or the checkout's branch when the session works in place)."""
    base: str = ""
    """The branch the worktree was made from: what Finish merges into."""
    base_commit: str = ""
    """The commit the branch started from: a worktree's diff falls back to it. A session in
    the checkout records where it began; its changes are counted against HEAD as it is now."""

    @property
    def is_git(self) -> bool:
        return bool(self.repo)

    @property
    def owned(self) -> bool:
        """A worktree made for the session: its folder and branch are ours to remove."""
        return self.isolation is Isolation.WORKTREE


@dataclass(frozen=True)
class FolderInfo:
    """A folder as the new-session dialog needs to know it."""

    folder: str
    """Absolute, with symlinks resolved."""
    repo: str = ""
    """Top level of the git checkout holding it ("" when it is not in git)."""
    branch: str = ""
    """The checked-out branch ("" on a detached HEAD or outside git)."""
    head: str = ""
    """The commit checked out ("" in a repository without commits)."""
    dirty: bool = False
    """Uncommitted or untracked changes (they stay there: a worktree starts from a commit)."""

    @property
    def is_git(self) -> bool:
        return bool(self.repo)


_UNSAFE = re.compile(r"[^A-Za-z0-9._/-]+")


def branch_name_for(session_name: str) -> str:
    """A branch name made from a session name: ``polypilot/fix-the-login-bug``."""
    slug = _UNSAFE.sub("-", session_name.strip().lower()).strip("-./")
    slug = re.sub(r"[-/]{2,}", "-", slug)[:50].strip("-./") or "session"
    return f"polypilot/{slug}"


MAX_NAMED = 5
"""Files named in a sentence about work at risk; the others are counted."""
MAX_LISTED = 100
"""Names a :class:`WorktreeState` carries per kind (a build folder may hold thousands)."""


def listed(names: tuple[str, ...]) -> tuple[tuple[str, ...], int]:
    """The first :data:`MAX_LISTED` of ``names``, and how many more there are."""
    return names[:MAX_LISTED], max(0, len(names) - MAX_LISTED)


def _named(names: tuple[str, ...], more: int) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    rest = len(names) - len(names[:MAX_NAMED]) + more
    return shown + (f" and {rest} more" if rest else "")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


@dataclass(frozen=True)
class WorktreeState:
    """What finishing a worktree has to care about. Names are listed up to :data:`MAX_LISTED`
    per kind; ``more_*`` counts the rest."""

    uncommitted: int
    """Changed or untracked files not committed."""
    ahead: int
    """Commits on the branch that the base does not have."""
    unpushed: int
    """Commits on the branch that no remote branch has."""
    untracked: tuple[str, ...] = ()
    """The new files among the uncommitted ones (git tracks no copy of them anywhere)."""
    ignored: tuple[str, ...] = ()
    """Git-ignored files and folders (a ``.env``, build output): never committed, so a removed
    folder takes the only copy."""
    submodules: tuple[str, ...] = ()
    """Checked-out submodules: their own changes are not looked at (git would run their config)."""
    more_untracked: int = 0
    more_ignored: int = 0
    more_submodules: int = 0

    @property
    def merged(self) -> bool:
        return self.uncommitted == 0 and self.ahead == 0

    @property
    def ignored_count(self) -> int:
        return len(self.ignored) + self.more_ignored

    def risks(self) -> list[str]:
        """What removing the worktree would throw away, one phrase each (files named)."""
        parts = []
        if self.uncommitted:
            new = f" (new: {_named(self.untracked, self.more_untracked)})" if self.untracked else ""
            parts.append(f"{_plural(self.uncommitted, 'uncommitted file')}{new}")
        if self.ignored:
            count = self.ignored_count
            parts.append(
                f"{_plural(count, 'git-ignored file')} or folder{'s' if count != 1 else ''} "
                f"({_named(self.ignored, self.more_ignored)})"
            )
        if self.submodules:
            count = len(self.submodules) + self.more_submodules
            parts.append(f"{_plural(count, 'checked-out submodule')} ({_named(self.submodules, self.more_submodules)})")
        if self.unpushed and self.ahead:
            parts.append(f"{_plural(self.unpushed, 'commit')} neither merged nor pushed")
        return parts

    def at_risk(self) -> str:
        """What removing the worktree would throw away, in words ("" when nothing)."""
        parts = self.risks()
        return ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else "".join(parts)


@dataclass(frozen=True)
class MergeResult:
    """How a merge went: ``conflicts`` lists the files when it could not be made."""

    merged: bool
    message: str
    conflicts: tuple[str, ...] = ()
