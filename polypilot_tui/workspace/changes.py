"""What a session changed: counted for the sidebar, and the whole diff for the diff view.

Both measure the working tree against the workspace's base commit, so committed,
uncommitted and untracked changes all count. git does the work (``diff --numstat``,
``ls-files --others``); untracked files are counted by reading them, bounded.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TypeVar

from polypilot_tui.domain.changeset import Changeset, ChangeStats, FileCount
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.workspace import Workspace
from polypilot_tui.infra.event_loop import cancel_and_wait
from polypilot_tui.workspace.diff_parse import parse_diff
from polypilot_tui.workspace.git import MAX_OUTPUT, AppConfig, GitResult, WorkspaceError, app_config, git

T = TypeVar("T")

MAX_UNTRACKED_FILES = 2000
"""Untracked files beyond this are counted as files, not read for their lines."""
MAX_UNTRACKED_BYTES = 4 * 1024 * 1024
"""An untracked file larger than this counts as a file without lines (like a binary)."""
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""git's empty tree: the base of a repository that has no commit yet."""
MAX_DIFF_CHARS = MAX_OUTPUT
"""Characters of one diff (every file's part together) read at most: beyond, it is cut and says so."""
_SNIFF = 8000  # git's own rule: a NUL in the first 8000 bytes makes a file binary


async def diff_base(workspace: Workspace) -> str:
    """What the changes are measured against.

    A worktree's branch is compared with where it meets its base branch *now* (their merge
    base), so main merged into the branch is not shown as the branch's own work, and a line
    the merge took out of main shows as removed; without a base branch, with the commit it
    started from. A session in the checkout shares it with the user and with every merge
    into it: its changes are what is not committed there (against HEAD now). Commits made in
    the checkout are its branch's history, as a worktree's are once merged; the commit it
    started at would count another session's merge as this one's work.
    """
    if _meets_base(workspace):
        meet = await git(["merge-base", f"refs/heads/{workspace.base}", "HEAD"], workspace.folder, check=False)
        if meet.ok and meet.text.strip():
            return meet.text.strip()
    if workspace.owned and workspace.base_commit:
        return workspace.base_commit
    head = await git(["rev-parse", "--verify", "--quiet", "HEAD"], workspace.folder, check=False)
    return "HEAD" if head.ok else EMPTY_TREE  # a repository without commits: everything is new


def _meets_base(workspace: Workspace) -> bool:
    """Whether :func:`diff_base` is where the worktree's branch meets its base branch."""
    return workspace.owned and bool(workspace.base)


async def diff_against_base(args: list[str], workspace: Workspace, settings: AppConfig) -> GitResult:
    """``git diff args`` of the working tree against :func:`diff_base`. Where the base is
    where the branch meets its base branch, git finds it itself (``--merge-base``): no
    ``merge-base`` process for the diff to wait for (the sidebar counts after every turn).
    When that diff fails (the base branch gone, no history in common, a git before 2.30),
    :func:`diff_base` says what the base is."""
    if _meets_base(workspace):
        meets = [*args, "--merge-base", f"refs/heads/{workspace.base}", "--"]
        found = await git(["diff", *meets], workspace.folder, check=False, settings=settings)
        if found.ok:
            return found
    base = await diff_base(workspace)
    return await git(["diff", *args, "--end-of-options", base, "--"], workspace.folder, settings=settings)


def top_level(workspace: Workspace) -> str:
    """The top of the working tree the changes are counted in: a worktree's folder, or the
    checkout holding a session's folder (the agent may change any file of it, and the diff
    names every path from there)."""
    return workspace.folder if workspace.owned or not workspace.repo else workspace.repo


async def untracked(workspace: Workspace, settings: AppConfig | None = None) -> list[str]:
    """Untracked, not ignored files of the workspace (paths from its :func:`top_level`);
    ``settings`` from :func:`app_config` there when the caller has them."""
    listed = await git(["ls-files", "--others", "--exclude-standard", "-z"], top_level(workspace), settings=settings)
    return [name for name in listed.out.decode("utf-8", "surrogateescape").split("\0") if name]


def _count_lines(path: Path) -> int:
    """Lines of a text file (0 for a binary, huge or unreadable one)."""
    try:
        if path.is_symlink() or path.stat().st_size > MAX_UNTRACKED_BYTES:
            return 0
        data = path.read_bytes()
    except OSError:
        return 0
    if b"\0" in data[:_SNIFF]:
        return 0
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


async def file_counts(workspace: Workspace) -> list[FileCount]:
    """Every changed file with its lines added and removed, against the base."""
    if not workspace.is_git:
        return []
    if not os.path.isdir(workspace.folder):
        raise WorkspaceError(f"the folder {workspace.folder} is gone")

    # Nothing waits that need not, so the count costs little more than git's diff: the diff
    # starts first (after the settings lookup, when there must be one: git finds the base
    # itself), then the untracked listing beside it (it reads no file, so needs no settings),
    # whose new files are counted while the diff still runs.
    folder = Path(top_level(workspace))

    async def tracked() -> list[FileCount]:
        settings = await app_config(workspace.folder)
        numstat = await diff_against_base(["--numstat", "-z", "-M"], workspace, settings)
        return _numstat_counts(numstat.out.decode("utf-8", "replace"))

    async def new_files() -> list[FileCount]:
        names = await untracked(workspace)
        readable = set(names[:MAX_UNTRACKED_FILES])

        def count() -> list[FileCount]:
            return [
                FileCount(name, _count_lines(folder / name) if name in readable else 0, 0, untracked=True)
                for name in names
            ]

        return await asyncio.to_thread(count)

    counting = [asyncio.ensure_future(tracked()), asyncio.ensure_future(new_files())]
    try:
        counts, fresh = await asyncio.gather(*counting)
    except BaseException:
        # The count failed: its git processes are killed, and their end waited for here, in the
        # loop (a git process still being started when the loop ends can hang it: infra/event_loop.py).
        await cancel_and_wait(counting)
        raise
    return counts + fresh


def _numstat_counts(output: str) -> list[FileCount]:
    """The files of ``git diff --numstat -z`` output, with their counts."""
    counts: list[FileCount] = []
    fields = output.split("\0")
    index = 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        parts = entry.split("\t")
        if len(parts) < 3:
            continue
        path = parts[2]
        if path == "":  # a rename: "old" and "new" follow as fields of their own
            path = fields[index + 1] if index + 1 < len(fields) else "?"
            index += 2
        binary = parts[0] == "-"  # git prints "-" for the counts of a binary file
        counts.append(FileCount(path, 0 if binary else int(parts[0]), 0 if binary else int(parts[1]), binary))
    return counts


def totals(counts: list[FileCount]) -> ChangeStats:
    """The files' counts added up."""
    return ChangeStats(len(counts), sum(c.added for c in counts), sum(c.removed for c in counts))


async def change_stats(workspace: Workspace) -> ChangeStats:
    """Files changed and lines added and removed, against the base."""
    return totals(await file_counts(workspace))


@dataclass(frozen=True, slots=True)
class DiffText:
    """The whole diff as git prints it; ``untracked`` names the files shown as new."""

    text: str
    truncated: bool = False
    untracked: tuple[str, ...] = ()
    base: str = "HEAD"
    """What the diff is against, as people read it: the base branch of a worktree, else the
    commit (or ``HEAD``)."""
    starts: tuple[int, ...] = ()
    """Where each untracked file's part of ``text`` begins (in ``untracked``'s order)."""


async def diff_text(workspace: Workspace, limit: int = MAX_DIFF_CHARS) -> DiffText:
    """The whole diff against the base as git prints it, untracked files as new files; at most
    ``limit`` characters (``truncated`` then says the rest was left out)."""
    if not workspace.is_git:
        return DiffText("")
    top = top_level(workspace)
    # One settings lookup for the burst of calls below (the folder is in the top's repository).
    # Each pair is waited for whole, a failure of one included: a git process left running
    # unawaited can hang the loop's end (infra/event_loop.py).
    based, looked = await asyncio.gather(diff_base(workspace), app_config(top), return_exceptions=True)
    base, settings = _succeeded(based), _succeeded(looked)
    diffed, found = await asyncio.gather(
        git(["diff", "-M", "--end-of-options", base, "--"], workspace.folder, settings=settings),
        untracked(workspace, settings),
        return_exceptions=True,
    )
    tracked, listed = _succeeded(diffed), _succeeded(found)
    text = tracked.out.decode("utf-8", "replace")
    parts, size = [text], len(text)
    truncated = tracked.truncated or size > limit
    names = listed[:MAX_UNTRACKED_FILES]
    shown: list[str] = []
    starts: list[int] = []
    for name in names:
        if truncated:
            break
        # --no-index exits 1 when the files differ, which is the point here
        new = await git(["diff", "--no-index", "--", os.devnull, name], top, check=False, settings=settings)
        if new.code not in (0, 1):
            raise WorkspaceError(f"the new file {name} cannot be read: {new.err.strip()}")
        part = new.out.decode("utf-8", "replace")
        if size + len(part) > limit:
            truncated = True
            break
        shown.append(os.fsencode(name).decode("utf-8", "replace"))
        starts.append(size)
        parts.append(part)
        size += len(part)
        truncated = new.truncated
    whole = "".join(parts)[:limit]
    named = workspace.base if workspace.base and workspace.base_commit else base  # people read branch names
    return DiffText(whole, truncated, tuple(shown), named, tuple(starts))


def _succeeded(outcome: T | BaseException) -> T:
    """What a call gathered with ``return_exceptions`` returned, or its failure raised."""
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def parse_changes(diff: DiffText) -> Changeset:
    """``diff`` parsed for the diff view (CPU only: run it off the event loop)."""
    return parse_diff(diff.text, diff.base, untracked=diff.untracked)


async def changeset(workspace: Workspace) -> Changeset:
    """The session's changes against its base, parsed for the diff view."""
    return await asyncio.to_thread(parse_changes, await diff_text(workspace))
