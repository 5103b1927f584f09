"""Where a session works: its folder, and when it has one, its own git worktree and branch."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Isolation(StrEnum):
    """How a session shares its repository with the others."""

    FOLDER = "folder"
    """Works in the folder as it is (a plain folder, or the checkout itself)."""
    WORKTREE = "worktree"
    """Works in a worktree of its own, on a branch of its own, made for it."""


@dataclass(frozen=True, slots=True)
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
