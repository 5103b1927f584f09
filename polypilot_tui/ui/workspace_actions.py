"""The app's side of the session dialogs: every git call they need, behind small methods.

The dialogs receive these callables and the data they return; they never run git
themselves, so a snapshot or a test can give them fixed answers instead (subclass and
override). Everything here is async and goes through :mod:`polypilot_tui.workspace`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from polypilot_tui.domain.workspace import FolderInfo, Isolation, MergeResult, Workspace, WorktreeState
from polypilot_tui.workspace import finish
from polypilot_tui.workspace.git import GitMissing, WorkspaceError
from polypilot_tui.workspace.worktrees import (
    create_worktree,
    in_place,
    inspect_folder,
    plan_worktree,
)


@dataclass(frozen=True, slots=True)
class NewSessionRequest:
    """What the new-session dialog asks for; the app turns it into a workspace and a session."""

    agent: str
    name: str = ""
    """"" for the manager's default name (``<agent>-<n>``)."""
    folder: str = ""
    """As typed (``~`` allowed)."""
    isolation: Isolation = Isolation.FOLDER
    branch: str = ""
    """The new branch (worktree only)."""
    base: str = ""
    """What the worktree starts from (worktree only; "" for the checkout's branch)."""


def resolved(folder: str) -> str:
    """The absolute form of a folder as typed (``~`` expanded, symlinks resolved)."""
    return str(Path(os.path.expanduser(folder.strip() or ".")).resolve())


def pull_request_unavailable() -> str:
    """Why a pull request cannot be opened from here ("" when the GitHub CLI is installed)."""
    return "" if shutil.which("gh") else "needs the GitHub CLI (gh), which is not installed here"


class WorkspaceActions:
    """Folder inspection, request checks and workspace creation for new sessions."""

    def __init__(self, worktree_root: Path) -> None:
        self.worktree_root = worktree_root

    async def inspect(self, folder: str) -> FolderInfo:
        """What the folder is (:class:`WorkspaceError` when it is no folder or git is missing)."""
        return await inspect_folder(folder.strip() or ".")

    async def check(self, request: NewSessionRequest) -> str:
        """Why the request cannot be made, in words, or "" when it can."""
        try:
            info = await self.inspect(request.folder)
        except GitMissing as exc:
            return str(exc) if request.isolation is Isolation.WORKTREE else ""
        except WorkspaceError as exc:
            return str(exc)
        if request.isolation is not Isolation.WORKTREE:
            return ""
        try:
            await plan_worktree(info, request.branch, request.base, self.worktree_root)
        except WorkspaceError as exc:
            return str(exc)
        return ""

    async def prepare(self, request: NewSessionRequest) -> Workspace:
        """The session's workspace: the folder as it is, or a new worktree on a new branch."""
        try:
            info = await self.inspect(request.folder)
        except GitMissing:
            if request.isolation is Isolation.WORKTREE:
                raise
            return Workspace(resolved(request.folder))  # no git here: a plain folder
        if request.isolation is Isolation.WORKTREE:
            return await create_worktree(info, request.branch.strip(), request.base.strip(), self.worktree_root)
        return in_place(info)

    async def unmake(self, workspace: Workspace) -> str:
        """Remove the worktree made for a session that could not be created; says what happened."""
        return await finish.unmake(workspace)

    def finisher(self, workspace: Workspace, session_name: str, prompts: Sequence[str]) -> FinishActions:
        """What the Finish dialog may do to ``workspace`` (``prompts``: the user's, in order)."""
        return FinishActions(workspace, session_name, prompts)


class FinishActions:
    """Finishing one session's worktree: each method is one button of the Finish dialog."""

    def __init__(self, workspace: Workspace, session_name: str, prompts: Sequence[str]) -> None:
        self.workspace = workspace
        self.session_name = session_name
        self.prompts = tuple(prompts)
        """The session's prompts, in order: the commit message is drafted from them."""
        self.pull_request_unavailable = pull_request_unavailable()
        """Why Open pull request cannot work here ("" when it can)."""

    async def state(self) -> WorktreeState:
        return await finish.worktree_state(self.workspace)

    async def draft_message(self) -> str:
        return await finish.draft_commit_message(self.workspace, self.prompts)

    async def commit(self, message: str) -> str:
        sha = await finish.commit_all(self.workspace, message)
        return f"Committed {sha[:10]} on {self.workspace.branch}."

    async def merge(self, fast_forward_only: bool) -> MergeResult:
        return await finish.merge_into_base(self.workspace, fast_forward_only=fast_forward_only)

    async def push(self) -> str:
        return await finish.push_branch(self.workspace)

    async def open_pull_request(self, title: str, body: str) -> str:
        return await finish.open_pull_request(self.workspace, title, body)

    async def discard(self, force: bool) -> str:
        return await finish.discard(self.workspace, force=force)
