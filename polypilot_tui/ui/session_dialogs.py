"""The dialogs that make, rename and finish sessions, and the app's side of each.

The dialogs ask; this layer asks the engine (its verbs, answered where the sessions run: git,
folders and worktrees are that machine's). A failure is shown and loses nothing (the
new-session dialog comes back with everything typed).
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from typing import Any

from polypilot_tui.domain.changeset import Changeset, ReviewComment, review_prompt
from polypilot_tui.domain.workspace import FolderInfo
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.diff_pages import read_changeset
from polypilot_tui.ui.action_failures import Failed, attempt
from polypilot_tui.ui.dashboard import Dashboard
from polypilot_tui.ui.screens.diff_view import DiffViewResult, DiffViewScreen
from polypilot_tui.ui.screens.finish import FinishScreen
from polypilot_tui.ui.screens.model_picker import ModelPickerScreen
from polypilot_tui.ui.screens.new_session import NewSessionScreen
from polypilot_tui.ui.screens.rename import RenameScreen
from polypilot_tui.ui.ui_state import remember_folder
from polypilot_tui.ui.workspace_actions import FinishActions

log = logging.getLogger(__name__)


class SessionDialogs(Dashboard):
    """New session (ctrl+n), rename (F4), the changes and their review (ctrl+o), finish (F5) and
    switch model (F8)."""

    def __init__(self, *args: Any, launch_folder: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.launch_folder = launch_folder or ("~" if self.remote is not None else os.getcwd())
        """The folder a new session starts in unless the user picks another (on another
        machine: the home folder there)."""
        self._reviews: dict[str, tuple[ReviewComment, ...]] = {}
        """Review comments not sent yet, per session (they wait for the next look)."""
        self._review_screens: weakref.WeakKeyDictionary[DiffViewScreen, str] = weakref.WeakKeyDictionary()
        """The session each open diff view shows."""

    def _run(self, title: str, coro: Awaitable[Any]) -> None:
        """Run an engine call as a worker; a failure becomes a toast, never a crash."""

        async def guarded() -> None:
            if isinstance(done := await attempt(log, title, coro), Failed):
                self.notify(f"{title} failed: {done.said}", severity="error", markup=False)

        self.run_worker(guarded(), name=title, group="session-actions", exit_on_error=False)

    # ---- new session ---------------------------------------------------------------
    def action_new_session(self) -> None:
        """Pick an agent, a folder, a name and (in git) a worktree, and start a session."""
        self.open_new_session()

    def open_new_session(self, initial: verbs.NewSession | None = None, problem: str = "") -> None:
        """The new-session dialog, filled with ``initial`` and showing ``problem`` when given."""
        self.run_worker(self._open_new_session(initial, problem), group="new-session-dialog", exit_on_error=False)

    async def _open_new_session(self, initial: verbs.NewSession | None, problem: str) -> None:
        # Recent folders are this dashboard's: on another machine they would name folders of this one.
        recent = self._ui_state.recent_folders if self.remote is None else []
        screen = NewSessionScreen(
            list(await self.engine.call(verbs.AGENTS, verbs.NoArgs())),
            self.settings.default_agent,
            folder=self.launch_folder,
            inspect=self._inspect_folder,
            check=self._check_new_session,
            list_folders=self._list_folders,
            recent=recent,
            initial=initial,
            problem=problem,
        )

        def answered(request: verbs.NewSession | None) -> None:
            if request is None:
                self.pane.editor.focus()
                return
            info = screen.folder_info if screen.inspected == request.folder else None
            self.run_worker(self._create_session(request, info), group="new-session", exit_on_error=False)

        self.push_screen(screen, answered)

    def engine_folder(self, typed: str) -> str:
        """A folder as typed in the dialog, for the engine: relative to the launch folder (the
        engine's own working folder is not this dashboard's); ``~`` is the engine's home."""
        typed = typed.strip() or "."
        return typed if typed.startswith("~") else os.path.normpath(os.path.join(self.launch_folder, typed))

    async def _inspect_folder(self, typed: str) -> FolderInfo:
        return await self.engine.call(verbs.INSPECT_FOLDER, verbs.FolderRef(self.engine_folder(typed)))

    async def _check_new_session(self, request: verbs.NewSession) -> str:
        try:
            await self.engine.call(verbs.CHECK_NEW_SESSION, self._for_engine(request))
        except EngineError as exc:
            return str(exc)
        return ""

    async def _list_folders(self, typed: str, prefix: str) -> Sequence[str]:
        try:
            listing = await self.engine.call(verbs.LIST_FOLDERS, verbs.FolderQuery(self.engine_folder(typed), prefix))
        except EngineError:  # no such folder (yet): nothing to suggest
            return ()
        return listing.names

    def _for_engine(self, request: verbs.NewSession) -> verbs.NewSession:
        return replace(request, folder=self.engine_folder(request.folder or ""))

    async def _create_session(self, request: verbs.NewSession, info: FolderInfo | None) -> None:
        try:
            sid = await self.engine.call(verbs.NEW_SESSION, self._for_engine(request))
        except EngineError as exc:
            # Checked a moment ago, but the folder or branch changed since: nothing typed is lost.
            self.notify(f"The session was not created: {exc}", severity="error", markup=False)
            self.open_new_session(request, str(exc))
            return
        self.select(sid)
        if self.remote is None:
            folder = info.folder if info is not None else self.engine_folder(request.folder or "")
            self._ui_state.recent_folders = remember_folder(self._ui_state.recent_folders, folder)
            self._ui_state_changed()
        self.pane.editor.focus()

    # ---- rename --------------------------------------------------------------------
    def action_rename_session(self) -> None:
        """Give the selected session another name."""
        sid = self.selected
        if sid is None or sid not in self.engine.ids():
            return

        def answered(name: str | None) -> None:
            if name is not None and sid in self.engine.ids():
                self._run("Rename", self.engine.call(verbs.RENAME, verbs.Rename(sid, name)))
            self.pane.editor.focus()

        self.push_screen(RenameScreen(self.engine.view(sid).name), answered)

    # ---- switch model --------------------------------------------------------------
    def action_switch_model(self) -> None:
        """List the selected session's models and switch it to the one picked (F8)."""
        sid = self.selected
        if sid is None or sid not in self.engine.ids():
            return

        def answered(model_id: str | None) -> None:
            if model_id is not None:
                self.notify(f"Model: {model_id} (from the next turn).", timeout=3, markup=False)
            self.pane.editor.focus()

        screen = ModelPickerScreen(
            self.engine.view(sid).name,
            lambda: self.engine.call(verbs.MODELS, verbs.SessionRef(sid)),
            lambda model_id: self.engine.call(verbs.SET_MODEL, verbs.SetModel(sid, model_id)),
        )
        self.push_screen(screen, answered)

    # ---- finish --------------------------------------------------------------------
    def action_finish_session(self) -> None:
        """Commit, merge, push, open a pull request for or discard the selected session's worktree."""
        sid = self.selected
        if sid is None or sid not in self.engine.ids():
            return
        session = self.engine.view(sid)
        workspace = session.workspace
        actions = FinishActions(self.engine, sid, workspace) if workspace is not None and workspace.owned else None
        screen = FinishScreen(session.name, workspace, actions)

        def closed(_result: object) -> None:
            if screen.discarded and sid in self.engine.ids():
                self.notify(
                    f"The worktree of {session.name!r} is removed: the session takes no more prompts "
                    "(its agent would work in a deleted folder); its conversation stays. "
                    "Close it with ctrl+p → Close session when you no longer need it.",
                    timeout=8,
                    markup=False,
                )
            self.pane.editor.focus()

        self.push_screen(screen, closed)

    # ---- changes and review -----------------------------------------------------------
    def action_review_changes(self) -> None:
        """The selected session's changes against its base, to read and comment on (ctrl+o)."""
        sid = self.selected
        if sid is None or sid not in self.engine.ids() or any(isinstance(s, DiffViewScreen) for s in self.screen_stack):
            return  # one diff view at a time: two would each keep their own comments
        workspace = self.engine.view(sid).workspace
        if workspace is None or not workspace.is_git:
            self.notify(
                "This session does not work in a git repository: there are no changes to show.",
                severity="warning",
                markup=False,
            )
            return
        self._run(
            "Count changes", self.engine.call(verbs.REFRESH_CHANGES, verbs.SessionRef(sid))
        )  # the sidebar follows the diff
        self.run_worker(self._open_changes(sid), group="changes", exclusive=True, exit_on_error=False)

    async def _changes(self, sid: str) -> Changeset | None:
        """The session's changes as the engine reads them (None, and a toast, when it cannot)."""
        try:
            changes, cut = await read_changeset(self.engine, sid)
        except EngineError as exc:
            self.notify(f"The changes cannot be shown: {exc}", severity="error", markup=False)
            return None
        if cut:
            self.notify(
                "The diff is larger than the engine reads: the files past the limit are left out "
                "(`polypilot diff --stat` lists them all).",
                severity="warning",
                timeout=8,
                markup=False,
            )
        return changes

    async def _open_changes(self, sid: str) -> None:
        changes = await self._changes(sid)
        if changes is None or sid not in self.engine.ids():
            return
        view = self.engine.view(sid)
        screen = DiffViewScreen(changes, session=view.name, branch=view.branch, comments=self._reviews.get(sid, ()))

        def closed(result: DiffViewResult | None) -> None:
            comments = result.comments if result is not None else ()
            if result is not None and result.send and comments and sid in self.engine.ids():
                self._reviews[sid] = comments  # until the agent has it: a failed send loses nothing

                async def send() -> None:
                    await self.engine.call(verbs.SEND, verbs.Send(sid, review_prompt(comments)))
                    if self._reviews.get(sid) == comments:
                        del self._reviews[sid]
                    self.notify(f"Review sent: {len(comments)} comment(s).", title=view.name, timeout=4, markup=False)

                self._run("Send review", send())
            elif comments:
                self._reviews[sid] = comments  # kept for the next look, never lost
            else:
                self._reviews.pop(sid, None)
            self.pane.editor.focus()

        self._review_screens[screen] = sid
        await self.push_screen(screen, closed)

    def on_diff_view_screen_refresh_requested(self, event: DiffViewScreen.RefreshRequested) -> None:
        screen = event.diff_screen
        sid = self._review_screens.get(screen)
        if sid is None:
            return

        async def refresh() -> None:
            changes = await self._changes(sid)
            if changes is None:
                return
            screen.set_changeset(changes)
            await self.engine.call(verbs.REFRESH_CHANGES, verbs.SessionRef(sid))

        self.run_worker(refresh(), group="changes-refresh", exclusive=True, exit_on_error=False)

    def _refocus_editor(self, _closed_with: object = None) -> None:
        """A dialog closed: typing goes to the prompt again."""
        self.pane.editor.focus()
