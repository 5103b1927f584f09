"""Finish a session's worktree: commit, merge into the base, push, open a pull request, discard.

The dialog receives the workspace and a :class:`~polypilot_tui.ui.finish_actions.FinishActions`
(the engine's verbs, answered where the session runs); each button runs one of them in a
worker and says in words what happened or why not. Discarding asks, and asks again naming what
would be lost when work is at risk.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Label, Static, TextArea

from polypilot_tui.domain.workspace import Workspace, WorktreeState
from polypilot_tui.engine.api import EngineError
from polypilot_tui.ui.finish_actions import FinishActions
from polypilot_tui.ui.formatting import plural
from polypilot_tui.ui.screens.confirm import ConfirmScreen

ACTION_BUTTONS = ("commit", "merge", "push", "pull-request", "discard")


def describe_state(state: WorktreeState, base: str) -> str:
    """The worktree's state as a sentence."""
    parts = [
        f"{plural(state.uncommitted, 'uncommitted file')}" if state.uncommitted else "nothing uncommitted",
        f"{plural(state.ahead, 'commit')} not in {base}" if state.ahead else f"nothing {base} does not have",
    ]
    if state.ahead:
        parts.append(f"{plural(state.unpushed, 'commit')} not pushed" if state.unpushed else "all pushed")
    if state.ignored:  # never committed: the folder holds the only copy
        parts.append(f"{plural(len(state.ignored), 'git-ignored file')} only here")
    return " · ".join(parts) + (" — merged, nothing to finish." if state.merged else ".")


class FinishScreen(ModalScreen[None]):
    """What to do with a session's worktree; Escape or Close leaves it as it is."""

    CSS_PATH = "finish.tcss"
    BINDINGS = [Binding("escape", "close", "Close", show=False)]

    def __init__(self, session_name: str, workspace: Workspace | None, actions: FinishActions | None) -> None:
        super().__init__()
        self._session_name = session_name
        self._workspace = workspace
        self._actions = actions if workspace is not None and workspace.owned else None
        self.busy = False
        """An action is running (the buttons wait for it)."""
        self.state: WorktreeState | None = None
        """The worktree as last looked at."""
        self.discarded = False

    def compose(self) -> ComposeResult:
        ws = self._workspace
        with VerticalScroll(id="finish-dialog"):
            yield Static(Content(f"Finish “{self._session_name}”"), id="finish-title")
            if self._actions is None or ws is None:
                where = f"in {ws.folder} itself" if ws is not None else "in its folder"
                yield Static(
                    f"This session works {where}, not in a worktree of its own: there is nothing "
                    "to commit, merge or discard from here.",
                    id="finish-not-owned",
                    markup=False,
                )
            else:
                yield Static(f"Branch {ws.branch} · base {ws.base}\n{ws.folder}", id="finish-where", markup=False)
                yield Static("Looking at the worktree…", id="finish-state", markup=False)
                yield Label("Commit message", classes="field-label")
                yield TextArea("", id="commit-message", soft_wrap=True, show_line_numbers=False)
                with Horizontal(classes="finish-row"):
                    yield Button(Content("Commit"), id="commit", compact=True)
                    yield Button(Content(f"Merge into {ws.base}"), id="merge", compact=True)
                    yield Checkbox(Content("fast-forward only"), value=True, id="fast-forward", compact=True)
                with Horizontal(classes="finish-row"):
                    yield Button(Content("Push branch"), id="push", compact=True)
                    yield Button(Content("Open pull request"), id="pull-request", compact=True)
                    yield Button(Content("Discard…"), id="discard", variant="error", compact=True)
                yield Static("", id="pull-request-note", markup=False)
                yield Static("", id="finish-result", markup=False)
            with Horizontal(id="finish-buttons"):
                yield Button(Content("Close"), id="finish-close", compact=True)

    def on_mount(self) -> None:
        if self._actions is None:
            self.query_one("#finish-close", Button).focus()
            return
        self.query_one("#commit-message", TextArea).focus()
        self.query_one("#pull-request-note").display = False
        self.run_worker(self._first_look(self._actions), group="finish", exit_on_error=False)

    async def _first_look(self, actions: FinishActions) -> None:
        await self._refresh_state()
        try:
            message = await actions.draft_message()
        except EngineError as exc:
            self._result(str(exc), error=True)
            return
        area = self.query_one("#commit-message", TextArea)
        if not area.text:
            area.load_text(message)

    async def _refresh_state(self) -> None:
        if self._actions is None or self._workspace is None:
            return
        try:
            found = await self._actions.state()
        except EngineError as exc:
            self.query_one("#finish-state", Static).update(f"✗ {exc}")
            return
        self.state = found.worktree
        self.query_one("#finish-state", Static).update(describe_state(self.state, self._workspace.base))
        if not self.discarded:  # where the sessions run, a pull request may not be possible
            self.query_one("#pull-request", Button).disabled = bool(found.pull_request)
        note = self.query_one("#pull-request-note", Static)
        note.update(f"Open pull request {found.pull_request}." if found.pull_request else "")
        note.display = bool(found.pull_request)

    def _result(self, text: str, *, error: bool = False) -> None:
        result = self.query_one("#finish-result", Static)
        result.update(("✗ " if error else "✓ ") + text)
        result.set_class(error, "-error")

    # ---- the actions ---------------------------------------------------------------
    def _start(self, step: Callable[[FinishActions], Awaitable[str]]) -> None:
        """Run one action (one at a time); its sentence or its error lands in the dialog."""
        if self.busy or self._actions is None:
            return
        self.busy = True
        self.run_worker(self._guarded(self._actions, step), group="finish", exit_on_error=False)

    async def _guarded(self, actions: FinishActions, step: Callable[[FinishActions], Awaitable[str]]) -> None:
        try:
            text = await step(actions)
            if text:
                self._result(text)
        except EngineError as exc:  # said in the dialog, never swallowed
            self._result(str(exc) or type(exc).__name__, error=True)
        finally:
            self.busy = False
        if not self.discarded:
            await self._refresh_state()

    @on(Button.Pressed, "#commit")
    def _commit(self) -> None:
        message = self.query_one("#commit-message", TextArea).text
        self._start(lambda actions: actions.commit(message))

    @on(Button.Pressed, "#merge")
    def _merge(self) -> None:
        fast_forward_only = self.query_one("#fast-forward", Checkbox).value

        async def merge(actions: FinishActions) -> str:
            result = await actions.merge(fast_forward_only)
            if result.merged:
                return result.message
            files = "".join(f"\n  {name}" for name in result.conflicts)
            raise EngineError(result.message + files)

        self._start(merge)

    @on(Button.Pressed, "#push")
    def _push(self) -> None:
        self._start(lambda actions: actions.push())

    @on(Button.Pressed, "#pull-request")
    def _pull_request(self) -> None:
        title, _, body = self.query_one("#commit-message", TextArea).text.partition("\n")
        self._start(lambda actions: actions.open_pull_request(title.strip() or self._session_name, body.strip()))

    @on(Button.Pressed, "#discard")
    def _discard(self) -> None:
        self._start(self._ask_then_discard)

    async def _ask_then_discard(self, actions: FinishActions) -> str:
        ws = actions.workspace
        first = ConfirmScreen(
            "Discard this worktree?",
            f"The worktree {ws.folder} and its branch {ws.branch} are removed.",
            "Discard",
        )
        if not await self.app.push_screen(first, wait_for_dismiss=True):
            return "Nothing was discarded."
        risks = (await actions.state()).worktree.risks()
        if risks:
            second = ConfirmScreen(
                "Throw this work away?",
                "Discarding loses these for good:\n" + "\n".join(f"• {risk}" for risk in risks),
                "Discard anyway",
            )
            if not await self.app.push_screen(second, wait_for_dismiss=True):
                return "Nothing was discarded."
        said = await actions.discard(force=bool(risks))
        self.discarded = True
        for button in ACTION_BUTTONS:
            self.query_one(f"#{button}", Button).disabled = True
        self.query_one("#finish-state", Static).update("Discarded.")
        return said

    @on(Button.Pressed, "#finish-close")
    def action_close(self) -> None:
        if self.busy:  # closing would cancel git in the middle of a merge or a removal
            self.notify("Wait for the action to finish: git is still at work.", timeout=3)
            return
        self.dismiss(None)
