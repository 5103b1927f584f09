"""The new-session dialog's side in the dashboard: its questions go to the engine.

The dialog asks; this asks the engine's verbs, answered where the sessions run (folders, git
and worktrees are that machine's). A folder typed in the dialog is relative to the folder the
dashboard started in. A failure loses nothing: the dialog comes back with everything typed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace

from textual.widget import Widget

from polypilot_tui.domain.workspace import FolderInfo
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine, EngineError


class NewSessionFlow:
    """ctrl+n: the dialog, its checks and folder suggestions, then the session made and shown."""

    def __init__(
        self,
        owner: Widget,
        engine: Engine,
        *,
        default_agent: str,
        launch_folder: str,
        remote: bool,
        recent: Callable[[], list[str]],
        made: Callable[[str, str | None], None],
        closed: Callable[[], None],
    ) -> None:
        self._owner = owner
        """Where the dialog's workers run and its toasts come from (the main screen)."""
        self._engine = engine
        self._default_agent = default_agent
        self.launch_folder = launch_folder
        """The folder a new session starts in unless the user picks another."""
        self._remote = remote
        self._recent = recent
        """The folders used last (none on another machine: they would name this one's)."""
        self._made = made
        """Called with a new session's id and, on this machine, the folder it works in."""
        self._closed = closed

    def open(self, initial: verbs.NewSession | None = None, problem: str = "") -> None:
        """The dialog, filled with ``initial`` and showing ``problem`` when given."""
        self._owner.run_worker(self._open(initial, problem), group="new-session-dialog", exit_on_error=False)

    async def _open(self, initial: verbs.NewSession | None, problem: str) -> None:
        from polypilot_tui.ui.screens.new_session import NewSessionScreen  # when first opened

        screen = NewSessionScreen(
            list(await self._engine.call(verbs.AGENTS, verbs.NoArgs())),
            self._default_agent,
            folder=self.launch_folder,
            inspect=self.inspect_folder,
            check=self._check,
            list_folders=self.list_folders,
            recent=self.recent_folders(),
            initial=initial,
            problem=problem,
        )

        def answered(request: verbs.NewSession | None) -> None:
            if request is None:
                self._closed()
                return
            info = screen.folder_info if screen.inspected == request.folder else None
            self._owner.run_worker(self._create(request, info), group="new-session", exit_on_error=False)

        self._owner.app.push_screen(screen, answered)

    def recent_folders(self) -> list[str]:
        """The folders used last; none on another machine (they would name this one's)."""
        return [] if self._remote else self._recent()

    def engine_folder(self, typed: str) -> str:
        """A folder as typed in the dialog, for the engine: relative to the launch folder (the
        engine's own working folder is not this dashboard's); ``~`` is the engine's home."""
        typed = typed.strip() or "."
        return typed if typed.startswith("~") else os.path.normpath(os.path.join(self.launch_folder, typed))

    async def inspect_folder(self, typed: str) -> FolderInfo:
        """The folder as typed, looked at where the sessions run (EngineError: it cannot be used)."""
        return await self._engine.call(verbs.INSPECT_FOLDER, verbs.FolderRef(self.engine_folder(typed)))

    async def _check(self, request: verbs.NewSession) -> str:
        try:
            await self._engine.call(verbs.CHECK_NEW_SESSION, self._for_engine(request))
        except EngineError as exc:
            return str(exc)
        return ""

    async def list_folders(self, typed: str, prefix: str) -> Sequence[str]:
        """Sub-folders of the folder as typed whose names begin with ``prefix`` (none when it is not there)."""
        try:
            listing = await self._engine.call(verbs.LIST_FOLDERS, verbs.FolderQuery(self.engine_folder(typed), prefix))
        except EngineError:  # no such folder (yet): nothing to suggest
            return ()
        return listing.names

    def _for_engine(self, request: verbs.NewSession) -> verbs.NewSession:
        return replace(request, folder=self.engine_folder(request.folder or ""))

    async def _create(self, request: verbs.NewSession, info: FolderInfo | None) -> None:
        try:
            sid = await self._engine.call(verbs.NEW_SESSION, self._for_engine(request))
        except EngineError as exc:
            # Checked a moment ago, but the folder or branch changed since: nothing typed is lost.
            self._owner.notify(f"The session was not created: {exc}", severity="error", markup=False)
            self.open(request, str(exc))
            return
        folder = None
        if not self._remote:
            folder = info.folder if info is not None else self.engine_folder(request.folder or "")
        self._made(sid, folder)
