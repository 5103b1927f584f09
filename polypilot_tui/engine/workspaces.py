"""The sessions' folders and worktrees, where the engine runs: the workspace verbs.

What a user does with a session's folder — reads its diff, finishes its worktree, picks a
folder for a new session — is an engine verb, answered here through
:mod:`polypilot_tui.workspace` (git) on the engine's machine: a dashboard over SSH or in a
browser sees that machine's folders, never its own. What git or the folder refuses comes back
as an :class:`~polypilot_tui.engine.api.EngineError` in the same words.
"""

from __future__ import annotations

import asyncio
import shutil
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from polypilot_tui.domain.changeset import FileCount
from polypilot_tui.domain.workspace import MergeResult, Workspace
from polypilot_tui.engine.api import BadRequest, EngineError
from polypilot_tui.engine.diff_pages import DiffReadings
from polypilot_tui.engine.verbs import MAX_STAT_FILES, DiffPage, DiffRange, DiffStat, FinishState
from polypilot_tui.workspace import finish
from polypilot_tui.workspace.changes import diff_text, file_counts, totals
from polypilot_tui.workspace.git import WorkspaceError


@contextmanager
def said() -> Iterator[None]:
    """git's and the folder's refusals, as the engine's (the words kept)."""
    try:
        yield
    except WorkspaceError as exc:
        raise EngineError(str(exc)) from None
    except OSError as exc:  # git could not even start (a vanished folder as its cwd, say)
        raise EngineError(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")) from None


def in_git(name: str, workspace: Workspace | None) -> Workspace:
    """The session's workspace when it is in git; else an EngineError that says so."""
    if workspace is None or not workspace.is_git:
        raise EngineError(f"the session {name!r} does not work in a git repository: it has no changes to show")
    return workspace


def own_worktree(name: str, workspace: Workspace | None) -> Workspace:
    """The session's own worktree; else an EngineError (``git add --all`` in the user's own
    checkout would sweep up their work)."""
    if workspace is None or not workspace.owned:
        where = f"in {workspace.folder} itself" if workspace is not None else "in its agent's folder"
        raise EngineError(
            f"the session {name!r} works {where}, not in a worktree of its own: commit, merge and push there with git"
        )
    return workspace


MAX_REMOTE = 200
"""Characters of a remote's name (or address) to push to."""


class WorkspaceDesk:
    """The workspace verbs' work, on the engine's machine."""

    def __init__(self) -> None:
        self._readings = DiffReadings()
        self._finishing: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        """One finishing step at a time per worktree (two dashboards, a command and a dashboard)."""

    # ---- the diff ------------------------------------------------------------------
    async def diff_page(self, request: DiffRange, workspace: Workspace) -> DiffPage:
        """A page of the diff: a new reading at 0 without one, else the next page of one."""
        if request.start < 0:
            raise BadRequest("start must not be negative")
        reading = request.reading
        if not reading:
            if request.start:
                raise BadRequest("a page after the first names its reading")
            with said():
                reading = self._readings.keep(request.session_id, await diff_text(workspace))
        return self._readings.page(request.session_id, reading, request.start)

    async def diff_stat(self, workspace: Workspace) -> DiffStat:
        """A line per changed file (at most MAX_STAT_FILES) and the totals."""
        with said():
            counts = await file_counts(workspace)
        listed: tuple[FileCount, ...] = tuple(counts[:MAX_STAT_FILES])
        return DiffStat(listed, len(counts) - len(listed), totals(counts))

    # ---- finishing a worktree -----------------------------------------------------------
    async def finish_state(self, workspace: Workspace) -> FinishState:
        with said():
            state = await finish.worktree_state(workspace)
        gh = "" if shutil.which("gh") else "needs the GitHub CLI (gh), which is not installed where the sessions run"
        return FinishState(state, gh)

    async def commit_message(self, workspace: Workspace, prompts: Sequence[str]) -> str:
        with said():
            return await finish.draft_commit_message(workspace, prompts)

    async def commit(self, workspace: Workspace, message: str) -> str:
        async with self._finishing[workspace.folder]:
            with said():
                return await finish.commit_all(workspace, message)

    async def merge(self, workspace: Workspace, fast_forward_only: bool) -> MergeResult:
        async with self._finishing[workspace.folder]:
            with said():
                return await finish.merge_into_base(workspace, fast_forward_only=fast_forward_only)

    async def push(self, workspace: Workspace, remote: str) -> str:
        if not remote.strip() or len(remote) > MAX_REMOTE or "\0" in remote:
            raise BadRequest(f"name the remote to push to (at most {MAX_REMOTE} characters)")
        async with self._finishing[workspace.folder]:
            with said():
                return await finish.push_branch(workspace, remote)

    async def pull_request(self, workspace: Workspace, title: str, body: str, prompts: Sequence[str]) -> str:
        if not title.strip():  # the drafted message: its subject, and its body unless one is given
            drafted, _, rest = (await self.commit_message(workspace, prompts)).partition("\n")
            title, body = drafted.strip(), body.strip() or rest.strip()
        async with self._finishing[workspace.folder]:
            with said():
                return await finish.open_pull_request(workspace, title, body)

    async def discard(self, workspace: Workspace, force: bool) -> str:
        async with self._finishing[workspace.folder]:
            with said():
                return await finish.discard(workspace, force=force)
