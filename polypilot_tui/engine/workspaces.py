"""The sessions' folders and worktrees, where the engine runs: the workspace verbs.

What a user does with a session's folder — reads its diff, finishes its worktree, picks a
folder for a new session — is an engine verb, answered here through
:mod:`polypilot_tui.workspace` (git) on the engine's machine: a dashboard over SSH or in a
browser sees that machine's folders, never its own. What git or the folder refuses comes back
as an :class:`~polypilot_tui.engine.api.EngineError` in the same words.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from polypilot_tui.domain.changeset import FileCount
from polypilot_tui.domain.workspace import FolderInfo, Isolation, MergeResult, Workspace, branch_name_for
from polypilot_tui.engine.api import BadRequest, EngineError
from polypilot_tui.engine.diff_pages import DiffReadings
from polypilot_tui.engine.verbs import (
    MAX_FOLDERS,
    MAX_STAT_FILES,
    DiffPage,
    DiffRange,
    DiffStat,
    FinishState,
    FolderListing,
    FolderQuery,
    NewSession,
)
from polypilot_tui.workspace import finish
from polypilot_tui.workspace.changes import diff_text, file_counts, totals
from polypilot_tui.workspace.git import GitMissing, WorkspaceError
from polypilot_tui.workspace.worktrees import (
    checkout_of,
    create_worktree,
    in_place,
    inspect_folder,
    plan_worktree,
    workspace_here,
)

log = logging.getLogger(__name__)


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
MAX_STAT_CHARS = 1 << 20
"""Characters of file names one diff stat carries at most."""
MAX_PATH = 4096
"""Characters of a folder's path a front end may name (Linux's PATH_MAX)."""
MAX_SCANNED = 5000
"""Entries of one folder looked at per listing: a folder of a million files answers at once."""


def engine_path(path: str) -> str:
    """A folder a front end names, as this machine reads it: absolute, or under ``~`` (this
    user's home here). A relative path would be read against the engine's own working folder,
    which is not the front end's: refused, as are ``~user``, NUL and overlong paths."""
    if not path or len(path) > MAX_PATH or "\0" in path:
        raise BadRequest(f"name a folder (at most {MAX_PATH} characters)")
    if path == "~" or path.startswith("~/"):
        path = os.path.expanduser(path)
    if not os.path.isabs(path):
        raise BadRequest(f"{path!r} is not an absolute folder: give it from / (or from ~)")
    return path


def sub_folders(path: str, prefix: str) -> FolderListing:
    """The sub-folders of ``path`` whose names begin with ``prefix`` (hidden ones only when it
    begins with a dot), sorted, bounded; blocking (run it in a thread)."""
    folder = Path(path).resolve()
    names: list[str] = []
    more = False
    try:
        with os.scandir(folder) as entries:
            for seen, entry in enumerate(entries):
                if seen >= MAX_SCANNED or len(names) >= MAX_FOLDERS:
                    more = True
                    break
                hidden = entry.name.startswith(".") and not prefix.startswith(".")
                if entry.name.startswith(prefix) and not hidden and _is_dir(entry):
                    names.append(entry.name)
    except FileNotFoundError:
        raise EngineError(f"the folder {folder} does not exist") from None
    except NotADirectoryError:
        raise EngineError(f"{folder} is not a folder") from None
    except OSError as exc:
        raise EngineError(f"the folder {folder} cannot be read: {exc.strerror or exc}") from None
    return FolderListing(str(folder), tuple(sorted(names)), more)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # a link to a folder is offered as one
    except OSError:
        return False


class WorkspaceDesk:
    """The workspace verbs' work, on the engine's machine."""

    def __init__(self) -> None:
        self._readings = DiffReadings()
        self._finishing: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        """One finishing step at a time per worktree (two dashboards, a command and a dashboard)."""

    # ---- folders for a new session ---------------------------------------------------
    async def list_folders(self, query: FolderQuery) -> FolderListing:
        if "/" in query.prefix or "\0" in query.prefix or len(query.prefix) > 255:
            raise BadRequest("the prefix is the start of one folder name")
        return await asyncio.to_thread(sub_folders, engine_path(query.path), query.prefix)

    async def inspect_folder(self, path: str) -> FolderInfo:
        with said():
            return await inspect_folder(engine_path(path))

    async def check(self, request: NewSession, name: str, root: Path) -> None:
        """Refused (EngineError, saying why) when ``request`` cannot be made; makes nothing."""
        if request.folder is None:
            if request.isolation is Isolation.WORKTREE:
                raise BadRequest("a new worktree needs the folder of a git repository")
            return
        with said():
            info = await _git_facts(request, engine_path(request.folder))
            if info is not None and request.isolation is Isolation.WORKTREE:
                await plan_worktree(info, _branch(request, name), request.base.strip(), root)

    async def prepare(self, request: NewSession, name: str, root: Path, agent_folder: str) -> Workspace | None:
        """Where the session works: the folder as it is (in its checkout when in git), or a new
        worktree on a new branch; None: its agent's folder, outside git."""
        if request.folder is None:
            await self.check(request, name, root)
            if not agent_folder:
                return None
            try:  # the agents file's folder, counted and diffed when it is in git
                return await workspace_here(agent_folder)
            except WorkspaceError as exc:  # gone, or git missing: the agent starts there all the same
                log.info("a session of its agent's folder works without a workspace: %s", exc)
                return None
        path = engine_path(request.folder)
        with said():
            info = await _git_facts(request, path)
            if info is None:
                return Workspace(str(Path(path).resolve()))
            if request.isolation is Isolation.WORKTREE:
                return await create_worktree(info, _branch(request, name), request.base.strip(), root)
            return in_place(info) if info.is_git else Workspace(info.folder)

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
        listed: list[FileCount] = []
        size = 0
        for count in counts[:MAX_STAT_FILES]:
            size += len(count.path)
            if size > MAX_STAT_CHARS:  # a reply is bounded by its names too, not only their number
                break
            listed.append(count)
        return DiffStat(tuple(listed), len(counts) - len(listed), totals(counts))

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

    async def unmake(self, workspace: Workspace | None) -> str:
        """Remove the worktree made for a session that was then not added; what happened."""
        return await finish.unmake(workspace) if workspace is not None else ""


async def _git_facts(request: NewSession, path: str) -> FolderInfo | None:
    """What git says of the request's folder; None when git is missing there and no worktree is
    asked (a plain folder, then). GitMissing for a worktree; WorkspaceError when unusable."""
    try:
        return await checkout_of(path)
    except GitMissing:
        if request.isolation is Isolation.WORKTREE:
            raise
        return None


def _branch(request: NewSession, name: str) -> str:
    return request.branch.strip() or branch_name_for(name)
