"""A session's folder: what it is (git or not, which branch), and a worktree made for it.

Worktrees live under one folder of ours (``Settings.worktrees_dir``), one per session, each
on a new branch that starts at the base the user chose. Everything goes through
``git worktree``; the registry records the result, so a restart finds them again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.workspace import FolderInfo, Isolation, Workspace
from polypilot_tui.infra.private import private_dir
from polypilot_tui.workspace.git import WorkspaceError, describe, fill_lfs_files, git


async def checkout_of(path: str) -> FolderInfo:
    """What ``path`` is: the checkout, branch and commit holding it when it is in git, with
    ``dirty`` left unread (``git status`` reads the whole tree, and a session's start needs
    only the rest); :class:`WorkspaceError` when it is no folder."""
    folder = Path(os.path.expanduser(path)).resolve()
    if not folder.exists():
        raise WorkspaceError(f"the folder {folder} does not exist")
    if not folder.is_dir():
        raise WorkspaceError(f"{folder} is not a folder")
    top = await git(["rev-parse", "--show-toplevel"], str(folder), check=False)
    if not top.ok:
        return FolderInfo(str(folder))
    repo = top.text.strip()
    branch = await git(["symbolic-ref", "--quiet", "--short", "HEAD"], repo, check=False)
    head = await git(["rev-parse", "--verify", "--quiet", "HEAD"], repo, check=False)
    return FolderInfo(str(folder), repo, branch.text.strip() if branch.ok else "", head.text.strip())


async def inspect_folder(path: str) -> FolderInfo:
    """:func:`checkout_of`, and whether the checkout has uncommitted changes (the new-session
    and fan-out dialogs say so: they stay there, a worktree starts from a commit)."""
    info = await checkout_of(path)
    if not info.is_git:
        return info
    status = await git(["status", "--porcelain", "-z", "--untracked-files=normal"], info.repo)
    return FolderInfo(info.folder, info.repo, info.branch, info.head, dirty=bool(status.out))


def in_place(info: FolderInfo) -> Workspace:
    """The session works in the folder itself (changes are counted against its HEAD)."""
    return Workspace(info.folder, Isolation.FOLDER, info.repo, info.branch, info.branch, info.head)


async def workspace_here(path: str) -> Workspace:
    """A session working in ``path`` as it is: in the checkout when it is in git."""
    info = await checkout_of(path)
    return in_place(info) if info.is_git else Workspace(info.folder)


MAX_BRANCH_BYTES = 200
"""A branch name's limit: its folder's name and git's ref file must each fit in 255 bytes."""


async def check_branch_name(repo: str, branch: str) -> None:
    """:class:`WorkspaceError` unless ``branch`` is a valid, unused branch name that means
    itself (``@`` or ``@{-1}`` would be read as another branch or commit)."""
    if not branch.strip():
        raise WorkspaceError("the branch needs a name")
    size = len(branch.encode("utf-8", "surrogateescape"))
    if size > MAX_BRANCH_BYTES:
        raise WorkspaceError(
            f"the branch name is too long ({len(branch)} characters, {size} bytes): at most {MAX_BRANCH_BYTES} bytes"
        )
    valid = await git(["check-ref-format", "--branch", branch], repo, check=False)
    # --branch expands shorthands: a name that comes back changed is not a name of its own.
    # "+main" would be a forced refspec to git push; "@" is HEAD to every git command.
    if not valid.ok or valid.text.strip() != branch or branch.startswith(("+", "-")) or branch == "@":
        raise WorkspaceError(f"{branch!r} is not a valid branch name")
    exists = await git(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], repo, check=False)
    if exists.ok:
        raise WorkspaceError(f"the branch {branch!r} exists already in {repo}: pick another name")


def worktree_folder(root: Path, repo: str, branch: str) -> Path:
    """Where the worktree for ``branch`` of ``repo`` goes: ``root/<repo>-<hash>/<branch>``."""
    tag = hashlib.sha256(repo.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return root / f"{Path(repo).name}-{tag}" / branch.replace("/", "-")


@dataclass(frozen=True, slots=True)
class WorktreePlan:
    """A worktree that can be made: where, on which branch, from which base and commit."""

    folder: Path
    branch: str
    base: str
    base_commit: str


async def plan_worktree(info: FolderInfo, branch: str, base: str, root: Path) -> WorktreePlan:
    """Check a worktree request without making anything; :class:`WorkspaceError` says why not."""
    if not info.is_git:
        raise WorkspaceError(f"{info.folder} is not in a git repository: a worktree needs one")
    if not info.head:
        raise WorkspaceError(f"{info.repo} has no commits yet: a worktree needs one to start from")
    base = base.strip() or info.branch or info.head
    resolved = await git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{base}^{{commit}}"], info.repo, check=False
    )
    if not resolved.ok:
        raise WorkspaceError(f"the base {base!r} is neither a branch nor a commit of {info.repo}")
    await check_branch_name(info.repo, branch)
    folder = worktree_folder(root, info.repo, branch)
    try:
        taken = folder.exists()
    except OSError as exc:  # a name too long for the file system, a folder we may not read
        raise WorkspaceError(f"the worktree cannot go to {folder}: {exc.strerror or exc}") from None
    if taken:
        raise WorkspaceError(f"{folder} exists already: remove it or pick another branch name")
    return WorktreePlan(folder, branch, base, resolved.text.strip())


async def create_worktree(info: FolderInfo, branch: str, base: str, root: Path) -> Workspace:
    """A new worktree of ``info``'s repository on a new ``branch`` starting at ``base``.

    A creation that fails leaves nothing behind: the branch, the worktree's folder and record,
    and the folders made for it are removed (only what this call made: the branch is made
    first, on its own, so a branch someone else made meanwhile is refused, never removed).
    """
    plan = await plan_worktree(info, branch, base, root)
    made = [folder for folder in (root, plan.folder.parent) if not folder.exists()]
    created = await git(["branch", "--end-of-options", branch, plan.base_commit], info.repo, check=False)
    if not created.ok:
        raise WorkspaceError(f"the branch {branch!r} could not be made: {describe(created)}")
    folder_ours = False
    try:
        private_dir(root)
        private_dir(plan.folder.parent)
        if plan.folder.exists():  # made meanwhile, by someone else: theirs, never removed
            raise WorkspaceError(f"{plan.folder} exists already: remove it or pick another branch name")
        folder_ours = True
        added = await git(["worktree", "add", str(plan.folder), branch], info.repo, check=False)
        if not added.ok:
            raise WorkspaceError(f"the worktree could not be made: {describe(added)}")
    except (WorkspaceError, OSError) as exc:
        await _undo_worktree(info.repo, plan, made, folder_ours)
        if isinstance(exc, OSError):
            raise WorkspaceError(f"the worktree could not be made: {exc.strerror or exc}") from None
        raise
    await fill_lfs_files(str(plan.folder))
    return Workspace(str(plan.folder), Isolation.WORKTREE, info.repo, branch, plan.base, plan.base_commit)


async def _undo_worktree(repo: str, plan: WorktreePlan, made: list[Path], folder_ours: bool) -> None:
    """Remove what a failed :func:`create_worktree` made: its branch and its folders (git
    removes a half-made worktree itself, unless it was killed on a timeout)."""
    if folder_ours and plan.folder.is_dir() and not plan.folder.is_symlink():  # absent before git ran
        shutil.rmtree(plan.folder, ignore_errors=True)
    await git(["worktree", "prune"], repo, check=False)
    await git(["branch", "-D", "--end-of-options", plan.branch], repo, check=False)
    for folder in reversed(made):  # the deepest first; only if still empty
        with contextlib.suppress(OSError):
            folder.rmdir()


def worktree_list(text: str) -> list[dict[str, str]]:
    """``git worktree list --porcelain -z`` as one record per worktree (``worktree``, ``branch``…)."""
    records: list[dict[str, str]] = [{}]
    for field in text.split("\0"):
        if not field:
            records.append({})
            continue
        key, _, value = field.partition(" ")
        records[-1][key] = value
    return [record for record in records if record]


async def folder_problem(workspace: Workspace) -> str:
    """Why the workspace can no longer be used (its folder deleted behind our back), or ""."""
    folder = Path(workspace.folder)
    if not folder.is_dir():
        return f"its folder {folder} is gone"
    if workspace.owned:
        listed = await git(["worktree", "list", "--porcelain", "-z"], workspace.repo, check=False)
        if not listed.ok:
            return f"its repository {workspace.repo} cannot be read: {describe(listed)}"
        paths = {record.get("worktree") for record in worktree_list(listed.text)}
        if str(folder) not in paths and str(folder.resolve()) not in paths:
            return f"{folder} is no longer a worktree of {workspace.repo}"
    return ""
