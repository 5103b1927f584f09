"""The fan-out dialog's side in the dashboard: its questions go to the engine.

Folders are looked at and suggested as in the new-session dialog (the same engine verbs,
relative to the launch folder); with several machines the machine is picked first, and the
dialog's questions and the fan-out go to its engine. FAN_OUT makes one session per attempt, each in a worktree of
its own; the compare view of the new group opens at once. A refusal loses nothing: the dialog
comes back with everything typed and the engine's reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from textual.widget import Widget

from polypilot_tui.domain.hosts import LOCAL
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine
from polypilot_tui.ui.action_failures import Failed, attempt
from polypilot_tui.ui.screens.new_session_flow import REMOTE_FOLDER, NewSessionFlow

log = logging.getLogger(__name__)


class FanOutFlow:
    """ctrl+f: the dialog, then the attempts made and compared."""

    def __init__(
        self,
        owner: Widget,
        engine: Engine,
        *,
        folders: NewSessionFlow,
        made: Callable[[str], None],
        closed: Callable[[], None],
    ) -> None:
        self._owner = owner
        """Where the dialog's workers run and its toasts come from (the main screen)."""
        self._engine = engine
        self._folders = folders
        """Looks at and suggests folders where the sessions run (the new-session dialog's way)."""
        self._made = made
        """Called with the new group's id."""
        self._closed = closed

    def open(self, initial: verbs.FanOut | None = None, problem: str = "", host: str | None = None) -> None:
        """The dialog, filled with ``initial`` and showing ``problem`` when given; with several
        machines, on ``host`` (None: the user picks it first)."""
        if host is None and self._engine.hosts():
            from polypilot_tui.ui.screens.host_picker import pick_host  # only a fleet needs it

            again = partial(self.open, initial, problem)
            default = self._folders.host_of_selected()
            pick_host(self._owner, self._engine, default, again, self._closed, title="Fan out on…")
            return
        where = host or LOCAL
        self._owner.run_worker(self._open(initial, problem, where), group="fan-out-dialog", exit_on_error=False)

    async def _open(self, initial: verbs.FanOut | None, problem: str, host: str) -> None:
        agents = await attempt(log, "the agents", self._engine.member(host).call(verbs.AGENTS, verbs.NoArgs()))
        if isinstance(agents, Failed):  # it stopped answering since it was picked: said, not a crash
            self._owner.notify(f"No fan-out on {host}: {agents.said}", severity="error", markup=False)
            self._closed()
            return
        from polypilot_tui.ui.screens.fan_out import FanOutScreen  # when first opened, after the first frame

        screen = FanOutScreen(
            list(agents),
            folder=self._folders.launch_folder if host == LOCAL else REMOTE_FOLDER,
            inspect=partial(self._folders.inspect_folder, host=host),
            list_folders=partial(self._folders.list_folders, host=host),
            recent=self._folders.recent_folders(host),
            initial=initial,
            problem=problem,
        )

        def answered(request: verbs.FanOut | None) -> None:
            if request is None:
                self._closed()
                return
            self._owner.run_worker(self._fan_out(request, host), group="fan-out", exit_on_error=False)

        self._owner.app.push_screen(screen, answered)

    async def _fan_out(self, request: verbs.FanOut, host: str) -> None:
        for_engine = replace(request, folder=self._folders.engine_folder(request.folder, host))
        group = await attempt(log, "Fan out", self._engine.member(host).call(verbs.FAN_OUT, for_engine))
        if isinstance(group, Failed):  # a folder or base that changed since, an agent gone: nothing typed is lost
            self._owner.notify(f"Not fanned out: {group.said}", severity="error", markup=False)
            self.open(request, group.said, host)
            return
        self._made(group)
