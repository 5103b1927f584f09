"""Finishing a session's worktree: commit, merge into the base, push, open a pull request,
or discard it — each through git (and ``gh``), each saying plainly what it did or why not.

Nothing is lost on the way: a merge that conflicts is aborted (the base is as it was and the
branch keeps its commits), and a worktree holding uncommitted, untracked or git-ignored files
(a ``.env`` has no other copy), a checked-out submodule or unpushed commits is removed only
when the caller says the user agreed (``force``), after naming them.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from polypilot_tui.domain.changeset import FileStatus
from polypilot_tui.domain.commit_message import draft_message
from polypilot_tui.domain.exit_status import exit_text
from polypilot_tui.domain.workspace import MergeResult, Workspace, WorktreeState, listed
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.workspace.git import WorkspaceError, describe, git, git_environment
from polypilot_tui.workspace.worktrees import worktree_list

log = logging.getLogger(__name__)

MAX_SAID = 2000
"""Characters of what gh printed that are passed on (its pull request's address)."""


async def _count(args: list[str], cwd: str) -> int:
    result = await git(args, cwd, check=False)
    return int(result.text.strip() or 0) if result.ok and result.text.strip().isdigit() else 0


def _status_entries(out: bytes) -> list[tuple[str, str]]:
    """``git status --porcelain -z`` as (code, path) pairs (a rename's source path skipped)."""
    fields = out.split(b"\0")
    entries = []
    index = 0
    while index < len(fields):
        field = fields[index]
        index += 1
        if len(field) < 4:
            continue
        code = field[:2].decode("ascii", "replace")
        if code[0] in "RC":
            index += 1  # the source path is a field of its own
        entries.append((code, field[3:].decode("utf-8", "replace")))
    return entries


async def _files_at_risk(folder: Path) -> tuple[int, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Uncommitted files (a count), and the names of the untracked ones, the ignored ones and
    the checked-out submodules."""
    status = await git(["status", "--porcelain", "-z", "--untracked-files=all", "--ignored=matching"], str(folder))
    entries = _status_entries(status.out)
    uncommitted = [path for code, path in entries if code != "!!"]
    untracked = tuple(path for code, path in entries if code == "??")
    ignored = tuple(path for code, path in entries if code == "!!")
    staged = await git(["ls-files", "--stage", "-z"], str(folder))
    gitlinks = [entry.split(b"\t", 1) for entry in staged.out.split(b"\0") if entry.startswith(b"160000 ")]
    submodules = tuple(
        name
        for _, raw in (link for link in gitlinks if len(link) == 2)
        if (folder / (name := raw.decode("utf-8", "surrogateescape")) / ".git").exists()
    )
    return len(uncommitted), untracked, ignored, submodules


async def worktree_state(workspace: Workspace) -> WorktreeState:
    """Uncommitted, untracked and ignored files, and commits not in the base and not on any
    remote.

    The commits are read from the repository by branch name, so they are still counted when
    the worktree's folder was deleted behind our back (its branch may hold the only copy).
    """
    folder = Path(workspace.folder)
    where = str(folder) if folder.is_dir() else workspace.repo
    head = f"refs/heads/{workspace.branch}" if workspace.owned and workspace.branch else "HEAD"
    return await _state(folder, where, head, await current_base(workspace, where))


async def _state(folder: Path, where: str, head: str, base: str) -> WorktreeState:
    files = await _files_at_risk(folder) if folder.is_dir() else (0, (), (), ())
    uncommitted, untracked, ignored, submodules = files
    exists = await git(["rev-parse", "--verify", "--quiet", head], where, check=False)
    ahead = await _count(["rev-list", "--count", head, "--not", base], where) if exists.ok else 0
    unpushed = await _count(["rev-list", "--count", head, "--not", base, "--remotes"], where) if exists.ok else 0
    (untracked, more_untracked), (ignored, more_ignored) = listed(untracked), listed(ignored)
    submodules, more_submodules = listed(submodules)
    return WorktreeState(
        uncommitted, ahead, unpushed, untracked, ignored, submodules, more_untracked, more_ignored, more_submodules
    )


async def current_base(workspace: Workspace, cwd: str) -> str:
    """The base branch as it is now (merged means in it now, not as it was when the worktree
    began), else the commit the worktree started from."""
    if workspace.base:
        branch = await git(["rev-parse", "--verify", "--quiet", f"refs/heads/{workspace.base}"], cwd, check=False)
        if branch.ok:
            return f"refs/heads/{workspace.base}"
    return workspace.base_commit or "HEAD"


_FILE_STATUS = {"?": FileStatus.ADDED, "A": FileStatus.ADDED, "D": FileStatus.DELETED, "R": FileStatus.RENAMED}


async def draft_commit_message(workspace: Workspace, prompts: Iterable[str]) -> str:
    """The message :func:`commit_all` is offered: the session's first real request (``prompts``:
    the user's, in order), then the files it would commit. One draft for the dashboard and
    ``polypilot finish commit``; secrets the redactor knows are taken out."""
    status = await git(["status", "--porcelain", "-z", "--untracked-files=all"], workspace.folder)
    files = [
        (_FILE_STATUS.get(code.strip()[:1], FileStatus.MODIFIED), path) for code, path in _status_entries(status.out)
    ]
    return REDACTOR.text(draft_message(prompts, files))


async def commit_all(workspace: Workspace, message: str) -> str:
    """Commit every change of the worktree (untracked files included); returns the commit id.
    The user asked for it: the repository's hooks run, as ``git commit`` would run them."""
    if not message.strip():
        raise WorkspaceError("the commit needs a message")
    await git(["add", "--all"], workspace.folder, user_asked=True)
    staged = await git(["diff", "--cached", "--quiet"], workspace.folder, check=False)
    if staged.ok:
        raise WorkspaceError("there is nothing to commit")
    committed = await git(
        ["commit", "--quiet", "-F", "-"], workspace.folder, check=False, stdin=message.encode(), user_asked=True
    )
    if not committed.ok:
        raise WorkspaceError(f"the commit failed: {describe(committed)}")
    return (await git(["rev-parse", "HEAD"], workspace.folder)).text.strip()


async def merge_into_base(workspace: Workspace, *, fast_forward_only: bool = False) -> MergeResult:
    """Merge the branch into its base in the repository's main checkout.

    The base must be the branch checked out there, with no uncommitted changes (git would
    refuse or mix them in). A conflict aborts the merge: the base stays as it was.
    """
    if not workspace.owned or not workspace.base:
        raise WorkspaceError("only a session's own worktree can be merged into its base")
    repo = workspace.repo
    current = await git(["symbolic-ref", "--quiet", "--short", "HEAD"], repo, check=False)
    if current.text.strip() != workspace.base:
        raise WorkspaceError(
            f"{repo} has {current.text.strip() or 'a detached HEAD'} checked out, not {workspace.base}: "
            f"check out {workspace.base} there to merge into it"
        )
    dirty = await git(["status", "--porcelain", "--untracked-files=no"], repo)
    if dirty.out.strip():
        raise WorkspaceError(f"{repo} has uncommitted changes: commit or stash them there before merging")
    state = await worktree_state(workspace)
    if state.uncommitted:
        raise WorkspaceError(f"the worktree has {state.risks()[0]}: commit them first")
    how = ["--ff-only"] if fast_forward_only else ["--no-ff", "-m", f"Merge branch '{workspace.branch}'"]
    merged = await git(["merge", "--quiet", *how, f"refs/heads/{workspace.branch}"], repo, check=False, user_asked=True)
    if merged.ok:
        return MergeResult(True, f"{workspace.branch} is merged into {workspace.base}")
    conflicted = await git(["diff", "--name-only", "--diff-filter=U", "-z"], repo, check=False)
    files = tuple(name for name in conflicted.text.split("\0") if name)
    if files:
        await git(["merge", "--abort"], repo, check=False, user_asked=True)
        return MergeResult(
            False,
            f"{workspace.branch} conflicts with {workspace.base} in {len(files)} file(s); the merge was "
            "undone and nothing changed: ask the agent to merge the base into its branch, then merge again",
            listed(files)[0],  # the count is in the message
        )
    if fast_forward_only and "fast-forward" in merged.err.lower():
        return MergeResult(
            False,
            f"{workspace.base} has commits {workspace.branch} does not have, so it cannot simply move forward: "
            "merge with a merge commit instead (not fast-forward only), or ask the agent to merge "
            f"{workspace.base} into its branch first; nothing changed",
        )
    return MergeResult(False, f"the merge was not made: {describe(merged)}")


async def push_branch(workspace: Workspace, remote: str = "origin") -> str:
    """Push the branch (setting its upstream); returns what to tell the user."""
    ref = f"refs/heads/{workspace.branch}"  # a full refspec: a name is never read as "+force" or a tag
    pushed = await git(
        ["push", "--set-upstream", "--end-of-options", remote, f"{ref}:{ref}"],
        workspace.folder,
        check=False,
        timeout=120,
        user_asked=True,
    )
    if not pushed.ok:
        raise WorkspaceError(f"the push to {remote} failed: {describe(pushed)}")
    return f"{workspace.branch} is pushed to {remote}"


async def open_pull_request(workspace: Workspace, title: str, body: str) -> str:
    """Open a pull request with the GitHub CLI; returns its address."""
    gh = shutil.which("gh")
    if gh is None:
        raise WorkspaceError(
            "the GitHub CLI (gh) is not installed: push the branch and open the pull request on the website"
        )
    if not Path(workspace.folder).is_dir():
        raise WorkspaceError(f"the worktree {workspace.folder} is gone: a pull request needs its branch pushed")
    proc = await asyncio.create_subprocess_exec(
        gh,
        "pr",
        "create",
        "--head",
        workspace.branch,
        "--base",
        workspace.base,
        "--title",
        title,
        "--body",
        body,
        cwd=workspace.folder,
        env=git_environment(),  # gh runs git: the same environment as ours, nothing leaked in
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise WorkspaceError("gh pr create did not finish within 120 s") from None
    if proc.returncode:
        said = err.decode("utf-8", "replace").strip()[:500] or exit_text(proc.returncode)
        raise WorkspaceError(f"gh pr create failed: {said}")
    return out.decode("utf-8", "replace").strip()[:MAX_SAID]


async def discard(workspace: Workspace, *, force: bool = False) -> str:
    """Remove the worktree and its branch. Without ``force`` it refuses, naming what would be
    lost: uncommitted, untracked and git-ignored files, checked-out submodules, commits."""
    if not workspace.owned:
        raise WorkspaceError("only a worktree made for the session is removed; a folder of yours is left alone")
    folder = Path(workspace.folder)
    if not force:  # a folder deleted by hand does not make its branch's commits any less precious
        state = await worktree_state(workspace)
        if state.at_risk():
            raise WorkspaceError(f"the worktree has {state.at_risk()}; nothing was removed")
    removed = await git(["worktree", "remove", "--force", str(folder)], workspace.repo, check=False)
    if not removed.ok and folder.exists():
        raise WorkspaceError(f"the worktree could not be removed: {describe(removed)}")
    await git(["worktree", "prune"], workspace.repo, check=False)
    deleted = await git(["branch", "-D", "--end-of-options", workspace.branch], workspace.repo, check=False)
    gone = "" if deleted.ok else f" (the branch stays: {describe(deleted)})"
    return f"the worktree {folder} and its branch {workspace.branch} are removed{gone}"


async def unmake(workspace: Workspace) -> str:
    """Remove the worktree made for a session that was then not created; what happened, in
    words. Like :func:`discard` without force, it keeps one that holds anything."""
    if not workspace.owned:
        return ""
    try:
        await discard(workspace)
    except WorkspaceError as exc:
        return f"the worktree made for it stays: {exc}"
    return f"the worktree made for it ({workspace.folder}) is removed again"


async def prune_orphans(repo: str, root: Path, in_use: Callable[[], Collection[str]]) -> list[str]:
    """Remove worktrees of ``repo`` under ``root`` that no session uses, but only those whose
    folder is gone, or that hold nothing :meth:`WorktreeState.at_risk` names (no uncommitted,
    untracked or ignored file, no checked-out submodule) and whose branch is merged into the
    main checkout's HEAD (PolyPilot #782): anything else may hold work. Returns what was
    removed; what is kept is logged with the reason."""
    listed = await git(["worktree", "list", "--porcelain", "-z"], repo)
    removed: list[str] = []
    for record in worktree_list(listed.text):
        path, branch = record.get("worktree", ""), record.get("branch", "").removeprefix("refs/heads/")
        if not path or not path.startswith(str(root) + "/") or path in in_use() or not branch:
            continue
        if not Path(path).is_dir():
            removed.append(path)  # `worktree prune` below forgets it; the branch may hold work: kept
            continue
        state = await _state(Path(path), repo, f"refs/heads/{branch}", "HEAD")  # HEAD: the main checkout's
        merged = (await git(["merge-base", "--is-ancestor", branch, "HEAD"], repo, check=False)).ok
        if state.at_risk() or not merged:
            log.info("kept the unused worktree %s: %s", path, state.at_risk() or f"{branch} is not merged")
            continue
        if path not in in_use():  # asked again: a session made meanwhile keeps it
            # --force: git's own check would miss the ignored files ours just looked at.
            await git(["worktree", "remove", "--force", path], repo, check=False)
            await git(["branch", "-d", "--end-of-options", branch], repo, check=False)
            removed.append(path)
    await git(["worktree", "prune"], repo, check=False)
    return removed


async def repos_under(root: Path) -> set[str]:
    """The repositories whose worktrees sit under ``root`` (read from each worktree's ``.git``)."""
    repos: set[str] = set()
    if not root.is_dir():
        return repos
    for folder in sorted(root.glob("*/*")):
        if not (folder / ".git").is_file():
            continue
        common = await git(["rev-parse", "--path-format=absolute", "--git-common-dir"], str(folder), check=False)
        if common.ok and common.text.strip():
            repos.add(str(Path(common.text.strip()).parent))
    return repos
