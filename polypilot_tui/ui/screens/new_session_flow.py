"""The new-session dialog's side in the dashboard: its questions go to the engine.

The dialog asks; this asks the engine's verbs, answered where the sessions run (folders, git
and worktrees are that machine's). A folder typed in the dialog is relative to the folder the
dashboard started in (on another machine: its home). With several machines (a fleet) the host
is picked first, and every question of the dialog goes to that host's engine. A failure loses
nothing: the dialog comes back with everything typed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from textual.widget import Widget

from polypilot_tui.domain.hosts import LOCAL
from polypilot_tui.domain.workspace import FolderInfo
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine, EngineError

REMOTE_FOLDER = "~"
"""Where a session on another machine starts unless the user picks another folder: its home."""


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
        host_of_selected: Callable[[], str] = lambda: LOCAL,
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
        self.host_of_selected = host_of_selected
        """The host of the session on screen: the picker starts there."""

    def open(self, initial: verbs.NewSession | None = None, problem: str = "", host: str | None = None) -> None:
        """The dialog, filled with ``initial`` and showing ``problem`` when given; with several
        machines, on ``host`` (None: the user picks it first)."""
        if host is None and self._engine.hosts():
            from polypilot_tui.ui.screens.host_picker import pick_host  # only a fleet needs it

            again = partial(self.open, initial, problem)
            pick_host(self._owner, self._engine, self.host_of_selected(), again, self._closed)
            return
        where = host or LOCAL
        self._owner.run_worker(self._open(initial, problem, where), group="new-session-dialog", exit_on_error=False)

    async def _open(self, initial: verbs.NewSession | None, problem: str, host: str) -> None:
        try:
            agents = list(await self._engine.member(host).call(verbs.AGENTS, verbs.NoArgs()))
        except (EngineError, KeyError) as exc:  # it stopped answering (or was removed) since it was picked
            self._owner.notify(f"No new session on {host}: {exc}", severity="error", markup=False)
            self._closed()
            return
        from polypilot_tui.ui.screens.new_session import NewSessionScreen  # when first opened

        screen = NewSessionScreen(
            agents,
            self._default_agent,
            folder=self.launch_folder if host == LOCAL else REMOTE_FOLDER,
            inspect=lambda typed: self.inspect_folder(typed, host),
            check=lambda request: self._check(request, host),
            list_folders=lambda typed, prefix: self.list_folders(typed, prefix, host),
            recent=self.recent_folders(host),
            initial=initial,
            problem=problem,
            title=f"New session on {host}" if host else ("New session on Local" if self._engine.hosts() else ""),
        )

        def answered(request: verbs.NewSession | None) -> None:
            if request is None:
                self._closed()
                return
            info = screen.folder_info if screen.inspected == request.folder else None
            self._owner.run_worker(self._create(request, info, host), group="new-session", exit_on_error=False)

        self._owner.app.push_screen(screen, answered)

    def _local(self, host: str) -> bool:
        """Folders typed for ``host`` are this machine's (the engine runs here)."""
        return host == LOCAL and not self._remote

    def recent_folders(self, host: str = LOCAL) -> list[str]:
        """The folders used last; none on another machine (they would name this one's)."""
        return self._recent() if self._local(host) else []

    def engine_folder(self, typed: str, host: str = LOCAL) -> str:
        """A folder as typed in the dialog, for ``host``'s engine: relative to the launch folder
        (the engine's own working folder is not this dashboard's), on another host to its home;
        ``~`` is the engine's home."""
        typed = typed.strip() or "."
        start = self.launch_folder if host == LOCAL else REMOTE_FOLDER
        return typed if typed.startswith("~") else os.path.normpath(os.path.join(start, typed))

    async def inspect_folder(self, typed: str, host: str = LOCAL) -> FolderInfo:
        """The folder as typed, looked at where the sessions run (EngineError: it cannot be used)."""
        ref = verbs.FolderRef(self.engine_folder(typed, host))
        return await self._engine.member(host).call(verbs.INSPECT_FOLDER, ref)

    async def _check(self, request: verbs.NewSession, host: str) -> str:
        try:
            await self._engine.member(host).call(verbs.CHECK_NEW_SESSION, self._for_engine(request, host))
        except EngineError as exc:
            return str(exc)
        return ""

    async def list_folders(self, typed: str, prefix: str, host: str = LOCAL) -> Sequence[str]:
        """Sub-folders of the folder as typed whose names begin with ``prefix`` (none when it is not there)."""
        query = verbs.FolderQuery(self.engine_folder(typed, host), prefix)
        try:
            listing = await self._engine.member(host).call(verbs.LIST_FOLDERS, query)
        except EngineError:  # no such folder (yet), or the host stopped answering: nothing to suggest
            return ()
        return listing.names

    def _for_engine(self, request: verbs.NewSession, host: str) -> verbs.NewSession:
        return replace(request, folder=self.engine_folder(request.folder or "", host))

    async def _create(self, request: verbs.NewSession, info: FolderInfo | None, host: str) -> None:
        try:
            sid = await self._engine.member(host).call(verbs.NEW_SESSION, self._for_engine(request, host))
        except EngineError as exc:
            # Checked a moment ago, but the folder or branch changed since: nothing typed is lost.
            self._owner.notify(f"The session was not created: {exc}", severity="error", markup=False)
            self.open(request, str(exc), host)
            return
        folder = None
        if self._local(host):
            folder = info.folder if info is not None else self.engine_folder(request.folder or "")
        self._made(sid, folder)
