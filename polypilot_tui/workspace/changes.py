"""What a session changed: counted for the sidebar, and the whole diff for the diff view.

Both measure the working tree against the workspace's base commit, so committed,
uncommitted and untracked changes all count. git does the work (``diff --numstat``,
``ls-files --others``); untracked files are counted by reading them, bounded.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.workspace import Workspace
from polypilot_tui.workspace.git import WorkspaceError, git

MAX_UNTRACKED_FILES = 2000
"""Untracked files beyond this are counted as files, not read for their lines."""
MAX_UNTRACKED_BYTES = 4 * 1024 * 1024
"""An untracked file larger than this counts as a file without lines (like a binary)."""
_SNIFF = 8000  # git's own rule: a NUL in the first 8000 bytes makes a file binary


def base_of(workspace: Workspace) -> str:
    """What the changes are measured against: the base commit, else HEAD."""
    return workspace.base_commit or "HEAD"


async def untracked(workspace: Workspace) -> list[str]:
    """Untracked, not ignored files of the workspace (paths relative to its folder)."""
    listed = await git(["ls-files", "--others", "--exclude-standard", "-z"], workspace.folder)
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


async def change_stats(workspace: Workspace) -> ChangeStats:
    """Files changed and lines added and removed, against the base."""
    if not workspace.is_git:
        return ChangeStats()
    if not os.path.isdir(workspace.folder):
        raise WorkspaceError(f"the folder {workspace.folder} is gone")
    numstat = await git(["diff", "--numstat", "-z", "--no-ext-diff", "-M", base_of(workspace)], workspace.folder)
    files = added = removed = 0
    fields = numstat.out.split(b"\0")
    index = 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        if not entry:
            continue
        counts = entry.split(b"\t")
        if len(counts) < 3:
            continue
        if counts[2] == b"":  # a rename: the two paths follow as their own fields
            index += 2
        files += 1
        added += int(counts[0]) if counts[0].isdigit() else 0  # "-" for a binary file
        removed += int(counts[1]) if counts[1].isdigit() else 0
    extra = await untracked(workspace)
    folder = Path(workspace.folder)
    readable = extra[:MAX_UNTRACKED_FILES]
    lines = await asyncio.to_thread(lambda: sum(_count_lines(folder / name) for name in readable))
    return ChangeStats(files + len(extra), added + lines, removed)


async def diff_text(workspace: Workspace) -> tuple[str, bool]:
    """The whole diff against the base as git prints it, untracked files as new files;
    and whether it was cut for size."""
    if not workspace.is_git:
        return "", False
    tracked = await git(["diff", "--no-color", "--no-ext-diff", "-M", base_of(workspace)], workspace.folder)
    parts = [tracked.out]
    truncated = tracked.truncated
    for name in (await untracked(workspace))[:MAX_UNTRACKED_FILES]:
        # --no-index exits 1 when the files differ, which is the point here
        new = await git(["diff", "--no-color", "--no-index", "--", os.devnull, name], workspace.folder, check=False)
        if new.code not in (0, 1):
            raise WorkspaceError(f"the new file {name} cannot be read: {new.err.strip()}")
        parts.append(new.out)
        truncated = truncated or new.truncated
    return b"".join(parts).decode("utf-8", "replace"), truncated
