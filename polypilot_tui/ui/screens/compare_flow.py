"""The compare view's side in the dashboard: its questions go to the engine.

It opens the view of a fan-out group (COMPARE), hands it a fresh comparison whenever one of
its attempts changed (the dashboard's redraw says which), runs the check (RUN_CHECK), opens an
attempt's diff through the review flow, and merges the one picked (PICK), discarding the others
only when the user said so — those kept for work at risk only after a second question naming
that work. Every outcome is said on the view, each attempt by name.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

from textual.widget import Widget

from polypilot_tui.domain.fan_out import Attempt, Comparison, Discarded
from polypilot_tui.domain.text import one_line
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine
from polypilot_tui.ui.action_failures import Failed, attempt
from polypilot_tui.ui.formatting import plural
from polypilot_tui.ui.screens.review_flow import ReviewFlow

if TYPE_CHECKING:  # the dialogs are imported when first opened, after the first frame
    from polypilot_tui.ui.screens.compare import CompareScreen

log = logging.getLogger(__name__)


def pick_text(result: verbs.PickResult, comparison: Comparison) -> str:
    """What a pick did, each attempt by name: merged or not (and why), each other one discarded
    or kept with the work that kept it."""
    names = {a.session_id: one_line(a.name, 40) for a in comparison.attempts}
    name = names.get(result.session_id, result.session_id)
    merge = result.merge
    if not merge.merged:
        conflicts = f" Conflicting files: {', '.join(merge.conflicts[:10])}." if merge.conflicts else ""
        return f"“{name}” was not merged: {one_line(merge.message, 200)}.{conflicts} Nothing was discarded."
    lines = [f"Merged “{name}”: {one_line(merge.message, 200)}"]
    if result.committed:
        lines[0] += f" (its uncommitted work committed as {result.committed[:10]})"
    removed = [names.get(d.session_id, d.session_id) for d in result.discarded if d.discarded]
    if removed:
        lines.append(f"Discarded: {', '.join(removed)}.")
    for kept in (d for d in result.discarded if not d.discarded):
        lines.append(
            f"Kept “{names.get(kept.session_id, kept.session_id)}”: {one_line(kept.message, 160)} "
            "(F5 on it finishes or discards it)."
        )
    return "\n".join(lines)


class CompareFlow:
    """F9 (or a fan-out just made): the compare view of one group at a time."""

    def __init__(
        self,
        owner: Widget,
        engine: Engine,
        *,
        review: ReviewFlow,
        run: Callable[[str, Awaitable[Any]], None],
        closed: Callable[[], None],
    ) -> None:
        self._owner = owner
        """Where workers run and toasts come from (the main screen)."""
        self._engine = engine
        self._review = review
        self._run = run
        self._closed = closed
        self.screen: CompareScreen | None = None
        """The compare view while it is open."""
        self._refreshing = False
        self._again = False
        """Attempts changed while a comparison was being read: read it once more after."""

    def open(self, group: str) -> None:
        """The compare view of ``group``, once the engine has said how its attempts are."""
        self._owner.run_worker(self._open(group), group="compare", exclusive=True, exit_on_error=False)

    async def _open(self, group: str) -> None:
        comparison = await attempt(log, "Compare", self._engine.call(verbs.COMPARE, verbs.GroupRef(group)))
        if isinstance(comparison, Failed):
            self._owner.notify(f"The attempts cannot be compared: {comparison.said}", severity="error", markup=False)
            return
        if self.screen is not None:
            self.screen.dismiss(None)
        from polypilot_tui.ui.screens.compare import CompareScreen

        screen = self.screen = CompareScreen(
            comparison, open_diff=self._review.open, run_check=self._run_check, pick=self._pick
        )

        def closed(_result: object) -> None:
            if self.screen is screen:
                self.screen = None
            self._closed()

        await self._owner.app.push_screen(screen, closed)

    def changed(self, session_ids: Collection[str]) -> None:
        """Sessions changed in the engine: a fresh comparison when one of them is an attempt shown."""
        screen = self.screen
        if screen is None or not any(a.session_id in session_ids for a in screen.comparison.attempts):
            return
        if self._refreshing:  # never cancel a read in flight (a call on the socket): read again after it
            self._again = True
            return
        self._refreshing = True
        self._owner.run_worker(self._refresh_while_changed(screen), group="compare-refresh", exit_on_error=False)

    async def _refresh_while_changed(self, screen: CompareScreen) -> None:
        try:
            while True:
                self._again = False
                await self._refresh(screen)
                if not self._again:
                    return
        finally:
            self._refreshing = False

    async def _refresh(self, screen: CompareScreen) -> None:
        group = screen.comparison.group
        comparison = await attempt(log, "Compare", self._engine.call(verbs.COMPARE, verbs.GroupRef(group)))
        if not isinstance(comparison, Failed) and screen.is_attached:
            screen.show(comparison)

    def _run_check(self) -> None:
        screen = self.screen
        if screen is None:
            return
        screen.say("Running the check in each attempt's worktree…")

        async def check() -> None:
            group = screen.comparison.group
            comparison = await self._engine.call(verbs.RUN_CHECK, verbs.GroupRef(group))
            if screen.is_attached:
                screen.show(comparison)
                screen.say_checks_running(len(comparison.attempts))

        self._run("Run check", check())

    def _pick(self, picked: Attempt) -> None:
        screen = self.screen
        if screen is None:
            return
        comparison = screen.comparison
        if comparison.picked:
            picked_name = next((a.name for a in comparison.attempts if a.session_id == comparison.picked), "")
            screen.say(f"“{one_line(picked_name, 40)}” was merged already.")
            return
        others = len(comparison.attempts) - 1

        def answered(choice: object) -> None:
            if choice not in ("discard", "keep"):
                return
            screen.say(f"Merging “{one_line(picked.name, 40)}”…")
            request = verbs.Pick(comparison.group, picked.session_id, discard_others=choice == "discard")
            self._owner.run_worker(self._merge(screen, request), group="pick", exclusive=True, exit_on_error=False)

        from polypilot_tui.ui.screens.pick_confirm import PickConfirmScreen

        self._owner.app.push_screen(PickConfirmScreen(picked.name, comparison.base, others), answered)

    async def _merge(self, screen: CompareScreen, request: verbs.Pick) -> None:
        result = await attempt(log, "Merge", self._engine.call(verbs.PICK, request))
        if isinstance(result, Failed):
            screen.say(f"Not merged: {result.said}")
            return
        screen.say(pick_text(result, screen.comparison), done=result.merge.merged)
        await self._refresh(screen)
        kept = [d for d in result.discarded if not d.discarded]
        if result.merge.merged and kept:
            self._offer_discard(screen, kept)

    def _offer_discard(self, screen: CompareScreen, kept: list[Discarded]) -> None:
        """The attempts a pick kept for their work at risk: discarded too when the user says so,
        the work named first (what a fan-out's losers usually hold is uncommitted files)."""
        names = {a.session_id: one_line(a.name, 40) for a in screen.comparison.attempts}
        work = "\n".join(f"“{names.get(d.session_id, d.session_id)}”: {one_line(d.message, 160)}" for d in kept)
        from polypilot_tui.ui.screens.confirm import ConfirmScreen

        question = ConfirmScreen(
            f"Discard {plural(len(kept), 'kept attempt')} anyway?",
            f"{work}\nDiscarding removes {'its' if len(kept) == 1 else 'their'} worktree and branch: "
            "this work is lost.",
            "Discard anyway",
            cancel="Keep",
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._owner.run_worker(self._discard(screen, kept), group="pick", exclusive=True, exit_on_error=False)

        self._owner.app.push_screen(question, answered)

    async def _discard(self, screen: CompareScreen, kept: list[Discarded]) -> None:
        names = {a.session_id: one_line(a.name, 40) for a in screen.comparison.attempts}
        said = []
        for attempt_ in kept:
            name = names.get(attempt_.session_id, attempt_.session_id)
            request = verbs.Discard(attempt_.session_id, force=True)
            result = await attempt(log, "Discard", self._engine.call(verbs.DISCARD, request))
            said.append(
                f"Not discarded “{name}”: {result.said}" if isinstance(result, Failed) else f"Discarded “{name}”."
            )
        screen.say("\n".join(said), done=True)
        await self._refresh(screen)
