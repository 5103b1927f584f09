"""A team's side in the dashboard: what it asks the engine about orchestrators and workers.

Making a session an orchestrator (ORCHESTRATE), stopping an orchestrator's workers when the
user says so (STOP_WORKERS), and which workers their team holds queued (TEAM_STATE: a queued
worker's session is idle, only its team knows it waits for a slot). Asked on a status change
of a member, never on every streamed word.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from textual.widget import Widget

from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine
from polypilot_tui.ui.action_failures import Failed, attempt
from polypilot_tui.ui.formatting import plural, session_names

log = logging.getLogger(__name__)


class TeamFlow:
    """Orchestrators and their workers, as the main screen acts on them."""

    def __init__(
        self,
        owner: Widget,
        engine: Engine,
        *,
        run: Callable[[str, Awaitable[Any]], None],
        redraw: Callable[[set[str]], None],
        closed: Callable[[], None],
    ) -> None:
        self._owner = owner
        """Where workers run and toasts come from (the main screen)."""
        self._engine = engine
        self._run = run
        self._redraw = redraw
        """Redraws these sessions' rows."""
        self._closed = closed
        self.worker_states: dict[str, str] = {}
        """Each worker's state as its team last said."""
        self._to_read: set[str] = set()
        """Orchestrators whose team is to be asked (until it answered)."""
        self._reading = False

    @property
    def queued(self) -> set[str]:
        """Workers their team holds until a slot frees."""
        return {sid for sid, state in self.worker_states.items() if state == "queued"}

    def changed(self, views: Sequence[SessionView], previous: Mapping[str, SessionView]) -> None:
        """The views as drawn now and before: ask the teams whose members changed status."""
        live = {view.id for view in views}
        for gone in set(self.worker_states) - live:
            del self.worker_states[gone]
        for view in views:
            before = previous.get(view.id)
            moved = before is None or (before.status, before.team_note) != (view.status, view.team_note)
            if moved and (view.orchestrator or view.parent):
                self._to_read.add(view.id if view.orchestrator else view.parent)
        if self._to_read and not self._reading:  # one reader: a call in flight is never cancelled
            self._reading = True
            self._owner.run_worker(self._read(), group="team-states", exit_on_error=False)

    async def _read(self) -> None:
        try:
            while self._to_read:
                lead = min(self._to_read)
                self._to_read.discard(lead)  # asked again at its next change if this fails
                call = self._engine.call(verbs.TEAM_STATE, verbs.SessionRef(lead))
                state = await attempt(log, "Team state", call)
                if isinstance(state, Failed):
                    continue
                states = {worker.worker: worker.state for worker in state.workers}
                if any(self.worker_states.get(sid) != s for sid, s in states.items()):
                    self.worker_states.update(states)
                    self._redraw(set(states))
        finally:
            self._reading = False

    def orchestrate(self, session_id: str, name: str) -> None:
        """Make the session an orchestrator: its agent is handed the team's tools."""

        async def make() -> None:
            team = await self._engine.call(verbs.ORCHESTRATE, verbs.Orchestrate(session_id))
            bounds = team.bounds
            self._owner.notify(
                f"“{one_line(name, 40)}” leads a team: it can start workers through its polypilot tools "
                f"({bounds.workers_at_once} at once, {bounds.total_workers} in all, {bounds.turns} turns). "
                "Its workers are listed under it.",
                timeout=8,
                markup=False,
            )

        self._run("Make orchestrator", make())

    def offer_to_stop_workers(self, orchestrator: SessionView, workers: Sequence[SessionView]) -> None:
        """Ask whether to stop the orchestrator's workers too; stop them when the user says so."""
        busy = [w for w in workers if w.status.busy]
        message = (
            f"“{one_line(orchestrator.name, 40)}” leads {plural(len(workers), 'worker')}"
            + (f", {len(busy)} working now ({session_names(busy)})" if busy else ", none working now")
            + ". Stopping them ends their turns and drops the starts still queued; their sessions stay."
        )

        async def stop() -> None:
            stopped = await self._engine.call(verbs.STOP_WORKERS, verbs.SessionRef(orchestrator.id))
            self._owner.notify(
                f"Stopped {plural(stopped, 'worker')} of “{one_line(orchestrator.name, 40)}”.", timeout=4, markup=False
            )

        def answered(yes: bool | None) -> None:
            if yes:
                self._run("Stop workers", stop())
            self._closed()

        from polypilot_tui.ui.screens.confirm import ConfirmScreen  # when first opened

        self._owner.app.push_screen(ConfirmScreen("Stop its workers too?", message, "Stop the workers"), answered)
