"""The app's side of the session dialogs: every git call they need, behind small methods.

The dialogs receive these callables and the data they return; they never run git
themselves, so a snapshot or a test can give them fixed answers instead (subclass and
override). Everything here is async and goes through :mod:`polypilot_tui.workspace`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from polypilot_tui.domain.workspace import FolderInfo, Isolation, MergeResult, Workspace
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine
from polypilot_tui.engine.verbs import FinishState
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


class FinishActions:
    """Finishing one session's worktree through its engine: each method is one button of the
    Finish dialog, answered where the session runs."""

    def __init__(self, engine: Engine, session_id: str, workspace: Workspace) -> None:
        self.engine = engine
        self.session_id = session_id
        self.workspace = workspace

    async def state(self) -> FinishState:
        return await self.engine.call(verbs.FINISH_STATE, verbs.SessionRef(self.session_id))

    async def draft_message(self) -> str:
        return await self.engine.call(verbs.COMMIT_MESSAGE, verbs.SessionRef(self.session_id))

    async def commit(self, message: str) -> str:
        sha = await self.engine.call(verbs.COMMIT, verbs.Commit(self.session_id, message))
        return f"Committed {sha[:10]} on {self.workspace.branch}."

    async def merge(self, fast_forward_only: bool) -> MergeResult:
        return await self.engine.call(verbs.MERGE, verbs.Merge(self.session_id, fast_forward_only))

    async def push(self) -> str:
        return await self.engine.call(verbs.PUSH, verbs.Push(self.session_id))

    async def open_pull_request(self, title: str, body: str) -> str:
        return await self.engine.call(verbs.PULL_REQUEST, verbs.PullRequest(self.session_id, title, body))

    async def discard(self, force: bool) -> str:
        return await self.engine.call(verbs.DISCARD, verbs.Discard(self.session_id, force))
