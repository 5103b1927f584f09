"""A dialog with a folder that is looked at as it is typed, and a base that follows its checkout.

The new-session and fan-out dialogs both ask for a folder: it is looked at (git or not, which
branch, uncommitted changes) a moment after it stops changing, in a worker, never on the key
path; a look overtaken by typing is dropped. The ``#base`` field follows the checkout's branch
until the user edits it. What a look means is each dialog's own (:meth:`_show_folder`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from textual import on
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Input

from polypilot_tui.domain.workspace import FolderInfo
from polypilot_tui.engine.api import EngineError

Inspect = Callable[[str], Awaitable[FolderInfo]]
"""Looks at a folder; raises EngineError when it cannot be used."""
INSPECT_DELAY = 0.25
"""Seconds the folder must stay unchanged before it is looked at (typing is not slowed)."""

ResultT = TypeVar("ResultT")


class FolderDialog(ModalScreen[ResultT]):
    """A modal dialog with ``#folder`` and ``#base`` inputs; subclasses say what a look means."""

    def __init__(self, inspect: Inspect, *, base_edited: bool) -> None:
        super().__init__()
        self._inspect = inspect
        self._inspect_timer: Timer | None = None
        self._base_edited = base_edited
        self._auto_base = ""
        self.folder_info: FolderInfo | None = None
        """The folder as last looked at (None while unknown or unusable)."""
        self.inspected: str | None = None
        """The folder text the last look was for."""

    def _value(self, id: str) -> str:
        return self.query_one(f"#{id}", Input).value

    def _show_folder(self, info: FolderInfo | None, problem: str) -> None:
        """Show what the look found: ``info``, or None and the ``problem`` in words."""
        raise NotImplementedError

    @on(Input.Changed, "#folder")
    def _folder_changed(self) -> None:
        if self._inspect_timer is not None:
            self._inspect_timer.stop()
        self._inspect_timer = self.set_timer(INSPECT_DELAY, self._start_inspect, name="inspect folder")

    @on(Input.Changed, "#base")
    def _base_changed(self, event: Input.Changed) -> None:
        self._base_edited = event.value != self._auto_base

    def _follow_checkout(self, info: FolderInfo) -> None:
        """The base is the checkout's branch (or commit) until the user names another."""
        if not self._base_edited:
            self._auto_base = info.branch or info.head[:10]
            self.query_one("#base", Input).value = self._auto_base

    def _start_inspect(self) -> None:
        self._inspect_timer = None
        folder = self._value("folder")
        self.run_worker(self._inspect_folder(folder), group="inspect", exclusive=True, exit_on_error=False)

    async def _inspect_folder(self, folder: str) -> None:
        try:
            info, problem = await self._inspect(folder), ""
        except EngineError as exc:
            info, problem = None, str(exc)
        if folder != self._value("folder"):
            return  # typed on meanwhile: the next look is already due
        self.folder_info = info
        self._show_folder(info, problem)
        self.inspected = folder
