"""The app's side of the Finish dialog: each of its buttons is one engine verb.

The dialog receives these callables and the data they return; it never runs git, and neither
does this module: the engine does, where the sessions run (engine/workspaces.py).
"""

from __future__ import annotations

from polypilot_tui.domain.workspace import MergeResult, Workspace
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine
from polypilot_tui.engine.verbs import FinishState


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
