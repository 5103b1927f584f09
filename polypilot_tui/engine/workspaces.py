"""The sessions' folders and worktrees, where the engine runs: the workspace verbs.

What a user does with a session's folder — reads its diff, finishes its worktree, picks a
folder for a new session — is an engine verb, answered here through
:mod:`polypilot_tui.workspace` (git) on the engine's machine: a dashboard over SSH or in a
browser sees that machine's folders, never its own. What git or the folder refuses comes back
as an :class:`~polypilot_tui.engine.api.EngineError` in the same words.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from polypilot_tui.domain.changeset import FileCount
from polypilot_tui.domain.workspace import Workspace
from polypilot_tui.engine.api import BadRequest, EngineError
from polypilot_tui.engine.diff_pages import DiffReadings
from polypilot_tui.engine.verbs import MAX_STAT_FILES, DiffPage, DiffRange, DiffStat
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


class WorkspaceDesk:
    """The workspace verbs' work, on the engine's machine."""

    def __init__(self) -> None:
        self._readings = DiffReadings()

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
