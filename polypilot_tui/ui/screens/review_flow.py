"""Reviewing a session's changes (ctrl+o): its diff as the engine reads it, comments, a review sent.

Comments not sent yet are kept per session until the agent has them: a closed diff view or a
failed send loses none; the next look at the diff shows them again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from textual.widget import Widget

from polypilot_tui.domain.changeset import Changeset, ReviewComment, review_prompt
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine, EngineError

if TYPE_CHECKING:  # the diff view (and its parser) is imported when first opened, after the first frame
    from polypilot_tui.ui.screens.diff_view import DiffViewResult

log = logging.getLogger(__name__)


class ReviewFlow:
    """The diff view of one session at a time, and the review comments waiting to be sent."""

    def __init__(
        self,
        owner: Widget,
        engine: Engine,
        *,
        run: Callable[[str, Awaitable[Any]], None],
        closed: Callable[[], None],
    ) -> None:
        self._owner = owner
        """Where workers run and toasts come from (the main screen)."""
        self._engine = engine
        self._run = run
        """Runs an engine call as a worker; a failure is a toast."""
        self._closed = closed
        self._comments: dict[str, tuple[ReviewComment, ...]] = {}
        """Review comments not sent yet, per session (they wait for the next look)."""

    def open(self, sid: str) -> None:
        """The session's changes against its base, to read and comment on."""
        from polypilot_tui.ui.screens.diff_view import DiffViewScreen

        if sid not in self._engine.ids() or any(isinstance(s, DiffViewScreen) for s in self._owner.app.screen_stack):
            return  # one diff view at a time: two would each keep their own comments
        workspace = self._engine.view(sid).workspace
        if workspace is None or not workspace.is_git:
            self._owner.notify(
                "This session does not work in a git repository: there are no changes to show.",
                severity="warning",
                markup=False,
            )
            return
        # The sidebar's count follows the diff.
        self._run("Count changes", self._engine.call(verbs.REFRESH_CHANGES, verbs.SessionRef(sid)))
        self._owner.run_worker(self._open(sid), group="changes", exclusive=True, exit_on_error=False)

    async def _changes(self, sid: str) -> Changeset | None:
        """The session's changes as the engine reads them (None, and a toast, when it cannot)."""
        from polypilot_tui.engine.diff_pages import read_changeset

        try:
            changes, cut = await read_changeset(self._engine, sid)
        except EngineError as exc:
            self._owner.notify(f"The changes cannot be shown: {exc}", severity="error", markup=False)
            return None
        if cut:
            self._owner.notify(
                "The diff is larger than the engine reads: the files past the limit are left out "
                "(`polypilot diff --stat` lists them all).",
                severity="warning",
                timeout=8,
                markup=False,
            )
        return changes

    async def _refreshed(self, sid: str) -> Changeset | None:
        """A fresh diff for the open view (``r``), the sidebar's count with it."""
        changes = await self._changes(sid)
        if changes is not None:
            await self._engine.call(verbs.REFRESH_CHANGES, verbs.SessionRef(sid))
        return changes

    async def _open(self, sid: str) -> None:
        changes = await self._changes(sid)
        if changes is None or sid not in self._engine.ids():
            return
        view = self._engine.view(sid)
        from polypilot_tui.ui.screens.diff_view import DiffViewScreen

        screen = DiffViewScreen(
            changes,
            session=view.name,
            branch=view.branch,
            comments=self._comments.get(sid, ()),
            refresh=lambda: self._refreshed(sid),
        )

        def closed(result: DiffViewResult | None) -> None:
            comments = result.comments if result is not None else ()
            if result is not None and result.send and comments and sid in self._engine.ids():
                self._comments[sid] = comments  # until the agent has it: a failed send loses nothing

                async def send() -> None:
                    await self._engine.call(verbs.SEND, verbs.Send(sid, review_prompt(comments)))
                    if self._comments.get(sid) == comments:
                        del self._comments[sid]
                    self._owner.notify(
                        f"Review sent: {len(comments)} comment(s).", title=view.name, timeout=4, markup=False
                    )

                self._run("Send review", send())
            elif comments:
                self._comments[sid] = comments  # kept for the next look, never lost
            else:
                self._comments.pop(sid, None)
            self._closed()

        await self._owner.app.push_screen(screen, closed)
