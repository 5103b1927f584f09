"""The dialogs that make, rename and finish sessions, and the app's side of each.

The dialogs ask; this layer does: the git work goes through
:class:`~polypilot_tui.ui.workspace_actions.WorkspaceActions`, then the manager. A failure is
shown and loses nothing (the new-session dialog comes back with everything typed).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.ui.dashboard import Dashboard
from polypilot_tui.ui.screens.finish import FinishScreen
from polypilot_tui.ui.screens.new_session import AgentChoice, NewSessionScreen
from polypilot_tui.ui.screens.rename import RenameScreen
from polypilot_tui.ui.ui_state import remember_folder
from polypilot_tui.ui.workspace_actions import NewSessionRequest, WorkspaceActions, resolved
from polypilot_tui.workspace.git import WorkspaceError

log = logging.getLogger(__name__)


class SessionDialogs(Dashboard):
    """New session (ctrl+n), rename (F4) and finish (F5) for the dashboard."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.launch_folder = os.getcwd()
        """The folder a new session starts in unless the user picks another."""
        self.workspace_actions = WorkspaceActions(self.settings.worktree_root)
        """The git work behind the dialogs (a test or snapshot may put fixed answers here)."""

    # ---- new session ---------------------------------------------------------------
    def action_new_session(self) -> None:
        """Pick an agent, a folder, a name and (in git) a worktree, and start a session."""
        self.open_new_session()

    def open_new_session(self, initial: NewSessionRequest | None = None, problem: str = "") -> None:
        """The new-session dialog, filled with ``initial`` and showing ``problem`` when given."""
        agents = [
            AgentChoice(name, config.kind, self.manager.cannot_start(name))
            for name, config in self.catalog.agents.items()
        ]
        screen = NewSessionScreen(
            agents,
            self.settings.default_agent,
            folder=self.launch_folder,
            inspect=self.workspace_actions.inspect,
            check=self.workspace_actions.check,
            recent=self._ui_state.recent_folders,
            initial=initial,
            problem=problem,
        )

        def answered(request: NewSessionRequest | None) -> None:
            if request is None:
                self.pane.editor.focus()
                return
            self.run_worker(self._create_session(request), group="new-session", exit_on_error=False)

        self.push_screen(screen, answered)

    async def _create_session(self, request: NewSessionRequest) -> None:
        try:
            workspace = await self.workspace_actions.prepare(request)
        except WorkspaceError as exc:
            # Checked a moment ago, but the folder or branch changed since: nothing typed is lost.
            self.notify(f"The session was not created: {exc}", severity="error", markup=False)
            self.open_new_session(request, str(exc))
            return
        if self._add_session(request.agent, request.name or None, workspace) is None:
            return
        self._ui_state.recent_folders = remember_folder(self._ui_state.recent_folders, resolved(request.folder))
        self._ui_state_changed()
        self.pane.editor.focus()

    # ---- rename --------------------------------------------------------------------
    def action_rename_session(self) -> None:
        """Give the selected session another name."""
        sid = self.selected
        if sid is None or sid not in self.manager.ids():
            return

        def answered(name: str | None) -> None:
            if name is not None and sid in self.manager.ids():
                try:
                    self.manager.rename(sid, name)
                except ValueError as exc:
                    self.notify(f"Not renamed: {exc}", severity="warning", markup=False)
            self.pane.editor.focus()

        self.push_screen(RenameScreen(self.manager.view(sid).name), answered)

    # ---- finish --------------------------------------------------------------------
    def action_finish_session(self) -> None:
        """Commit, merge, push, open a pull request for or discard the selected session's worktree."""
        sid = self.selected
        if sid is None or sid not in self.manager.ids():
            return
        session = self.manager.session(sid)
        workspace = session.workspace
        last_prompt = next((i.text for i in reversed(session.history) if i.kind is ItemKind.USER), "")
        actions = (
            self.workspace_actions.finisher(workspace, session.name, last_prompt)
            if workspace is not None and workspace.owned
            else None
        )
        self.push_screen(FinishScreen(session.name, workspace, actions), self._refocus_editor)

    def _refocus_editor(self, _closed_with: object = None) -> None:
        """A dialog closed: typing goes to the prompt again."""
        self.pane.editor.focus()
