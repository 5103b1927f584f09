"""The fan-out dialog: one task to several new sessions, each in a worktree of its own.

The task, the agents (typed as ``copilot:2,opencode:1``, or added one at a time from the
catalog), the repository's folder, the base the worktrees start from and an optional check
command run in each worktree when its attempt ends, and the sandbox of every attempt (shown
as the attempts' agents' own until the user picks one; only a choice the user made is sent,
as in the new-session dialog). The folder is looked at as it is typed
(folder_dialog.py); what stands in the way is said in the dialog, which stays open with
everything typed. It returns the :class:`~polypilot_tui.engine.verbs.FanOut` request, its
folder as typed.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Button, Input, Label, OptionList, Static, TextArea

from polypilot_tui.domain.agents import AgentOffer
from polypilot_tui.domain.fan_out import FanOutSpecError, parse_fan_out, spec_of
from polypilot_tui.domain.sandbox import SandboxMode
from polypilot_tui.domain.workspace import FolderInfo
from polypilot_tui.engine.verbs import FanOut
from polypilot_tui.ui.folder_suggester import FolderSuggester, ListFolders
from polypilot_tui.ui.screens.folder_dialog import FolderDialog, Inspect
from polypilot_tui.ui.screens.new_session import EnterChoice, SandboxChoice, agent_option, by_readiness


class FanOutScreen(FolderDialog[FanOut | None]):
    """ctrl+s (or the button) fans the task out; Escape cancels. Enter in a one-line field does
    too; in the task it is a new line (a task is often several)."""

    CSS_PATH = ["new_session.tcss", "fan_out.tcss"]
    """The new-session dialog's look (the same dialog ids), then what differs (a screen's CSS
    files outrank any DEFAULT_CSS, so the differences are a file too)."""
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "fan_out", "Fan out"),
    ]

    def __init__(
        self,
        agents: Sequence[AgentOffer],
        *,
        folder: str,
        inspect: Inspect,
        list_folders: ListFolders | None = None,
        recent: Sequence[str] = (),
        initial: FanOut | None = None,
        problem: str = "",
    ) -> None:
        super().__init__(inspect, base_edited=bool(initial and initial.base))
        self._agents = by_readiness(agents)
        self._folder = initial.folder if initial else folder
        self._list_folders = list_folders
        self._recent = list(recent)
        self._initial = initial
        self._problem = problem

    def compose(self) -> ComposeResult:
        initial = self._initial
        with VerticalScroll(id="new-session-dialog"):
            yield Static("Fan out a task", id="new-session-title", markup=False)
            yield Label("Task (every attempt gets it)", classes="field-label")
            yield TextArea(initial.task if initial else "", id="task", soft_wrap=True, tab_behavior="focus")
            yield Label("Agents: one per attempt, e.g. copilot:2,opencode:1", classes="field-label")
            yield Input(spec_of(initial.agents) if initial else "", id="agents", placeholder="copilot:2,opencode:1")
            yield Label("Add one attempt of (Enter)", classes="field-label")
            yield OptionList(*[agent_option(agent) for agent in self._agents], id="agent-list")
            yield Label("Folder: a git repository", classes="field-label")
            yield Input(
                self._folder,
                id="folder",
                suggester=FolderSuggester(self._recent, self._list_folders),
                select_on_focus=False,
            )
            yield Static("", id="folder-note", markup=False)
            with Horizontal(id="worktree-fields"):
                with Vertical():
                    yield Label("Base (where every branch starts)", classes="field-label")
                    yield Input(initial.base if initial else "", id="base", placeholder="the checkout's branch")
                with Vertical():
                    yield Label("Check command (optional)", classes="field-label")
                    yield Input(initial.check if initial else "", id="check", placeholder="e.g. pytest -q")
            with Horizontal(id="sandbox-row"):
                yield Label("Sandbox", id="sandbox-label")
                yield SandboxChoice("workspace: writes only its worktree", initial.sandbox if initial else None)
            yield Static(self._problem, id="new-session-error", markup=False)
            with Horizontal(id="new-session-buttons"):
                yield Button(Content("Cancel"), id="fan-out-cancel", compact=True)
                yield Button(Content("Fan out"), id="fan-out-create", variant="primary", compact=True)
            yield Static(
                "ctrl+s fans out · Esc cancels · each attempt gets a worktree and a branch of its own",
                id="new-session-hint",
                markup=False,
            )

    def on_mount(self) -> None:
        self._error(self._problem)
        self._follow_agents_sandbox()
        self._start_inspect()
        self.query_one("#task", TextArea).focus()

    # ---- the fields ------------------------------------------------------------------
    @on(OptionList.OptionSelected, "#agent-list")
    def _add_agent(self, event: OptionList.OptionSelected) -> None:
        """One more attempt of the agent picked, counted in the spec (``copilot:2`` → ``copilot:3``)."""
        event.stop()
        agent = event.option.id
        if agent is None:
            return
        try:
            agents = parse_fan_out(self._value("agents")) if self._value("agents").strip() else ()
        except FanOutSpecError as exc:
            self._error(f"Agents: {exc}")
            return
        self.query_one("#agents", Input).value = spec_of((*agents, agent))

    @property
    def sandbox_mode(self) -> SandboxMode:
        """The sandbox shown: chosen, or the attempts' agents' own until then."""
        return self.query_one(SandboxChoice).mode

    @on(Input.Changed, "#agents")
    def _follow_agents_sandbox(self) -> None:
        """Until the user picks one, the choice shows ``workspace`` when every attempt's agent
        is sandboxed by its own entry (sending none keeps each agent's own: never widened)."""
        try:
            agents = parse_fan_out(self._value("agents")) if self._value("agents").strip() else ()
        except FanOutSpecError:
            return
        offers = {offer.name: offer for offer in self._agents}
        boxed = bool(agents) and all(
            (offer := offers.get(name)) is not None and offer.sandbox is SandboxMode.WORKSPACE for name in agents
        )
        self.query_one(SandboxChoice).follow(SandboxMode.WORKSPACE if boxed else SandboxMode.OFF)

    @on(EnterChoice.Taken, "#sandbox")
    def _sandbox_taken(self, event: EnterChoice.Taken) -> None:
        """Enter on the choice: that one, and fan out."""
        event.stop()
        self.query_one(SandboxChoice).take(event.taken)
        self.action_fan_out()

    def _show_folder(self, info: FolderInfo | None, problem: str) -> None:
        note = self.query_one("#folder-note", Static)
        if info is None:
            note.update(f"✗ {problem}")
        elif not info.is_git:
            note.update("✗ Not in a git repository: the attempts need worktrees of one.")
        else:
            where = f"on {info.branch}" if info.branch else "with HEAD detached"
            note.update(
                f"In the git repository {info.repo}, {where}" + (", with uncommitted changes." if info.dirty else ".")
            )
            self._follow_checkout(info)
        note.set_class(info is None or not info.is_git, "-error")

    # ---- fan out and cancel ----------------------------------------------------------
    def request(self) -> FanOut:
        """What the dialog would fan out now; ValueError (FanOutSpecError) says what is wrong."""
        task = self.query_one("#task", TextArea).text.strip()
        if not task:
            raise ValueError("Write the task every attempt gets.")
        agents = parse_fan_out(self._value("agents"))
        offers = {offer.name: offer for offer in self._agents}
        for name in dict.fromkeys(agents):
            offer = offers.get(name)
            if offer is None:
                raise ValueError(f"Agents: {name!r} is not an agent polypilot knows ({', '.join(offers)}).")
            if offer.cannot_start:
                raise ValueError(f"Agents: {name} cannot start here: {offer.cannot_start}")
        return FanOut(
            task,
            agents,
            folder=self._value("folder").strip(),
            base=self._value("base").strip(),
            check=self._value("check").strip(),
            sandbox=self.query_one(SandboxChoice).asked(),
        )

    def _error(self, problem: str) -> None:
        error = self.query_one("#new-session-error", Static)
        error.update(f"✗ {problem}" if problem else "")
        error.display = bool(problem)

    @on(Input.Submitted)
    @on(Button.Pressed, "#fan-out-create")
    def action_fan_out(self) -> None:
        """Close with the request when nothing stands in the way; else say what does."""
        try:
            request = self.request()
        except ValueError as exc:
            self._error(str(exc))
            return
        info = self.folder_info if self.inspected == self._value("folder") else None  # else the engine says
        if info is not None and not info.is_git:
            self._error("The folder is not in a git repository: the attempts need worktrees of one.")
            return
        self.dismiss(request)

    @on(Button.Pressed, "#fan-out-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
