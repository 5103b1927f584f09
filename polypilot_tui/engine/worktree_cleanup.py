"""At start, worktrees no session uses any more are removed — only those that hold nothing.

A closed session leaves its worktree (its work may matter). At the next start, worktrees
under our folder that no session uses are pruned by PolyPilot's rule (#782): the folder is
gone, or the tree is clean and the branch merged. Anything else stays, untouched.
"""

from __future__ import annotations

import logging
from pathlib import Path

from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.workspace.finish import prune_orphans, repos_under
from polypilot_tui.workspace.git import WorkspaceError

log = logging.getLogger(__name__)


async def prune_orphaned_worktrees(manager: SessionManager, root: Path) -> list[str]:
    """Remove the orphans of every repository with worktrees under ``root``; returns their folders."""

    def in_use() -> set[str]:  # read at each removal: ctrl+n may add a worktree meanwhile
        return {w.folder for sid in manager.ids() if (w := manager.session(sid).workspace) is not None}

    workspaces = [manager.session(sid).workspace for sid in manager.ids()]
    repos = {w.repo for w in workspaces if w is not None and w.owned} | await repos_under(root)
    removed: list[str] = []
    for repo in sorted(repos):
        if not Path(repo).is_dir():
            continue
        try:
            removed += await prune_orphans(repo, root, in_use)
        except WorkspaceError as exc:  # a broken repository: its worktrees stay as they are
            log.warning("orphaned worktrees of %s not pruned: %s", repo, exc)
    if removed:
        log.info("pruned %d orphaned worktrees: %s", len(removed), ", ".join(removed))
    return removed
