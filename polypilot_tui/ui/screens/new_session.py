"""The new-session dialog: agent, folder, name, in a git repository a worktree of its own, and
its sandbox (off, or its folder alone writable: the agent's own choice until another is made).

The folder is looked at as it is typed (folder_dialog.py). Create asks the app's ``check`` first:
a problem (the folder is gone, the branch exists, the base is unknown) is shown in words and
the dialog stays open with everything typed. The dialog returns the
:class:`~polypilot_tui.engine.verbs.NewSession` request, its folder as typed; the app asks the
engine (looking at folders, checking, making the worktree: where the sessions run).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import Button, Input, Label, OptionList, RadioButton, RadioSet, Static
from textual.widgets.option_list import Option

from polypilot_tui.domain.agents import AgentOffer, Availability
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.limits import NAME_CHARS
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode
from polypilot_tui.domain.workspace import FolderInfo, Isolation, branch_name_for
from polypilot_tui.engine.verbs import NewSession
from polypilot_tui.ui.action_failures import Failed, attempt
from polypilot_tui.ui.folder_suggester import FolderSuggester, ListFolders
from polypilot_tui.ui.screens.folder_dialog import FolderDialog, Inspect

log = logging.getLogger(__name__)

Check = Callable[[NewSession], Awaitable[str]]
"""Says why a request cannot be made ("" when it can)."""

_ORDER = (
    Availability.READY,
    Availability.NEEDS_SIGN_IN,
    Availability.NO_KEY,
    Availability.MISCONFIGURED,
    Availability.NOT_EXECUTABLE,
    Availability.NOT_INSTALLED,
)


def by_readiness(agents: Sequence[AgentOffer]) -> list[AgentOffer]:
    """Those that can start first, then those that may (a sign-in polypilot cannot see), then the rest."""
    return sorted(agents, key=lambda agent: _ORDER.index(agent.availability))


def agent_option(agent: AgentOffer) -> Option:
    """An agent in a list to pick from: one that cannot start here is greyed out with the reason."""
    what = agent.title if agent.title and agent.title.lower() != agent.name.lower() else agent.kind
    label = Content(f"{agent.name}  ({what})")
    if agent.cannot_start:
        label = Content.assemble(label, "\n", (f"  ✗ {agent.cannot_start}", "$text-error"))
    elif not agent.ready:  # may work (signed in where polypilot cannot see): offered, with the reason
        label = Content.assemble(label, "\n", (f"  ! {agent.problem}", "$text-warning"))
    return Option(label, id=agent.name, disabled=agent.cannot_start is not None)


class EnterChoice(RadioSet):
    """A choice on one line (checkout or worktree; the sandbox). Enter takes the highlighted
    button and creates the session (a RadioSet's own Enter only took it: Enter seemed to do
    nothing here); space and the arrows choose as in any RadioSet."""

    BINDINGS = [Binding("enter", "take_and_create", "Create", show=False)]

    @dataclass
    class Taken(Message):
        """Enter on the choice: create the session with the button ``taken`` (its id)."""

        choice: EnterChoice
        taken: str

        @property
        def control(self) -> EnterChoice:
            """The choice it came from (what ``@on``'s selector matches)."""
            return self.choice

    def action_take_and_create(self) -> None:
        self.action_toggle_button()  # the highlighted one is the one taken (shown at once)
        # Its Changed messages are on their way: the choice goes with this message, as taken.
        highlighted = self._nodes[self._selected].id if self._selected is not None else None
        pressed = self.pressed_button
        self.post_message(self.Taken(self, highlighted or (pressed.id if pressed is not None else None) or ""))


class SandboxChoice(EnterChoice):
    """Off or workspace, for a new session or a fan-out's attempts. It shows a default (the
    agents' own) until the user picks one; only a pick is sent (none keeps each agent's own:
    the dialog never widens an agent's sandbox)."""

    def __init__(self, workspace_words: str, chosen: Sandbox | None = None) -> None:
        super().__init__(id="sandbox")
        self._words = workspace_words
        self._shown = chosen.mode if chosen is not None else SandboxMode.OFF
        self.chosen = chosen is not None
        """The user picked (a request sent back with a problem: as it was picked)."""

    def compose(self) -> ComposeResult:
        workspace = self._shown is SandboxMode.WORKSPACE
        yield RadioButton(Content("off"), value=not workspace, id="sandbox-off")
        yield RadioButton(Content(self._words), value=workspace, id="sandbox-workspace")

    @property
    def mode(self) -> SandboxMode:
        """The sandbox shown: picked, or the default."""
        on = self.query_one("#sandbox-workspace", RadioButton).value
        return SandboxMode.WORKSPACE if on else SandboxMode.OFF

    def follow(self, default: SandboxMode) -> None:
        """Show ``default`` (the agents' own), unless the user picked."""
        if not self.chosen:
            self._show(default)

    def take(self, taken: str) -> SandboxMode:
        """Enter took the button ``taken`` (its id): picked, before the buttons say so."""
        self.chosen = True
        mode = SandboxMode.WORKSPACE if taken == "sandbox-workspace" else SandboxMode.OFF
        self._show(mode)
        return mode

    def asked(self) -> Sandbox | None:
        """What a request asks: the pick, or None (each agent's own)."""
        return Sandbox(self.mode) if self.chosen else None

    def _show(self, mode: SandboxMode) -> None:
        self._shown = mode
        button = "#sandbox-workspace" if mode is SandboxMode.WORKSPACE else "#sandbox-off"
        self.query_one(button, RadioButton).value = True

    @on(RadioSet.Changed)
    def _changed(self) -> None:
        """A change that is not the default shown is the user's: kept from now on."""
        if self.mode is not self._shown:
            self.chosen = True


class NewSessionScreen(FolderDialog[NewSession | None]):
    """Enter creates the session from every field (in a list or on a button it does what that
    control does: picks the agent and creates, takes a recent folder, presses the button);
    Escape cancels. An agent that cannot start here (its command not installed, its key not
    set) is listed, greyed out, with the reason."""

    CSS_PATH = "new_session.tcss"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        # Reached when the control with the keyboard has no Enter of its own (the scrolled
        # dialog itself, a label a click focused): Enter still creates.
        Binding("enter", "create", "Create", show=False),
    ]

    def __init__(
        self,
        agents: list[AgentOffer],
        default: str | None = None,
        *,
        folder: str,
        inspect: Inspect,
        check: Check,
        list_folders: ListFolders | None = None,
        recent: Sequence[str] = (),
        initial: NewSession | None = None,
        problem: str = "",
        title: str = "",
    ) -> None:
        super().__init__(inspect, base_edited=bool(initial and initial.base))
        self._title = title or "New session"
        """Names the machine with several (``New session on devbox``)."""
        self._agents = by_readiness(agents)
        self._default = initial.agent if initial else default
        self._folder = (initial.folder or folder) if initial else folder
        self._check = check
        self._list_folders = list_folders
        self._recent = list(recent)
        self._initial = initial
        self._problem = problem
        self._auto_branch = ""
        self._branch_edited = bool(initial and initial.branch)
        self.checking = False
        """A Create is being checked (a second Enter waits for it)."""
        self._refused: NewSession | None = None
        """What the shown error was about (edited away, the error goes)."""

    # ---- layout --------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        initial = self._initial
        with VerticalScroll(id="new-session-dialog"):
            yield Static(self._title, id="new-session-title", markup=False)
            yield Label("Agent", classes="field-label")
            yield OptionList(*[agent_option(agent) for agent in self._agents], id="agent-list")
            yield Label("Folder", classes="field-label")
            suggester = FolderSuggester(self._recent, self._list_folders)
            yield Input(self._folder, id="folder", suggester=suggester, select_on_focus=False)
            yield Static("", id="folder-note", markup=False)
            if self._recent:
                yield Label("Recent folders", classes="field-label")
                yield OptionList(*[Option(Content(f), id=f) for f in self._recent], id="recent-list")
            yield Label("Name (optional)", classes="field-label")
            yield Input(
                initial.name or "" if initial else "", placeholder="<agent>-<number>", id="name", max_length=NAME_CHARS
            )
            with Vertical(id="git-box"):
                yield Static("", id="git-note", markup=False)
                with EnterChoice(id="isolation"):
                    worktree = bool(initial and initial.isolation is Isolation.WORKTREE)
                    yield RadioButton(Content("Work in the checkout"), value=not worktree, id="in-place")
                    yield RadioButton(Content("New worktree on a new branch"), value=worktree, id="worktree")
                with Horizontal(id="worktree-fields"):
                    with Vertical():
                        yield Label("Branch", classes="field-label")
                        yield Input(initial.branch if initial else "", id="branch")
                    with Vertical():
                        yield Label("Base", classes="field-label")
                        yield Input(initial.base if initial else "", id="base")
                yield Static("", id="worktree-note", markup=False)
            with Horizontal(id="sandbox-row"):
                yield Label("Sandbox", id="sandbox-label")
                yield SandboxChoice(
                    "workspace: writes only its folder, secrets hidden", initial.sandbox if initial else None
                )
            yield Static(self._problem, id="new-session-error", markup=False)
            with Horizontal(id="new-session-buttons"):
                yield Button(Content("Cancel"), id="new-session-cancel", compact=True)
                yield Button(Content("Create"), id="new-session-create", variant="primary", compact=True)
            hint = "Enter creates · Esc cancels · → takes the suggested folder"
            if any(not agent.ready for agent in self._agents):
                hint += " · `polypilot agents` says what each agent needs"
            yield Static(hint, id="new-session-hint", markup=False)

    def on_mount(self) -> None:
        options = self.query_one("#agent-list", OptionList)
        startable = [agent.name for agent in self._agents if not agent.cannot_start]
        ready = [agent.name for agent in self._agents if agent.ready]
        if startable:
            pick = self._default if self._default in startable else (ready or startable)[0]
            options.highlighted = [agent.name for agent in self._agents].index(pick)
        self.query_one("#git-box").display = False
        self._follow_agent_sandbox()
        self._error(self._problem)
        self._sync_branch()
        self._start_inspect()
        options.focus()

    # ---- what the user types -------------------------------------------------------
    @property
    def agent(self) -> str | None:
        """The agent highlighted in the list (None when none can start)."""
        option = self.query_one("#agent-list", OptionList).highlighted_option
        return option.id if option is not None and not option.disabled else None

    @property
    def isolation(self) -> Isolation:
        """A worktree only when the folder is in git and the user picked one."""
        worktree = self.query_one("#worktree", RadioButton).value
        return Isolation.WORKTREE if self.query_one("#git-box").display and worktree else Isolation.FOLDER

    @property
    def sandbox_mode(self) -> SandboxMode:
        """The sandbox chosen (or the highlighted agent's own, shown until changed)."""
        return self.query_one(SandboxChoice).mode

    @on(OptionList.OptionHighlighted, "#agent-list")
    def _follow_agent_sandbox(self) -> None:
        """Another agent highlighted: its own sandbox is shown, unless the user chose one."""
        offer = next((a for a in self._agents if a.name == self.agent), None)
        self.query_one(SandboxChoice).follow(offer.sandbox if offer is not None else SandboxMode.OFF)

    @on(Input.Changed, "#name")
    @on(OptionList.OptionHighlighted, "#agent-list")
    def _sync_branch(self) -> None:
        """The branch follows the name (or agent) until the user edits it."""
        auto = branch_name_for(self._value("name") or self.agent or "session")
        if not self._branch_edited:
            self._auto_branch = auto
            self.query_one("#branch", Input).value = auto

    @on(Input.Changed, "#branch")
    def _branch_changed(self, event: Input.Changed) -> None:
        self._branch_edited = event.value != self._auto_branch
        self._describe_worktree()

    @on(Input.Changed, "#base")
    def _base_described(self) -> None:
        self._describe_worktree()

    @on(RadioSet.Changed)
    def _isolation_changed(self) -> None:
        self._edited()
        self._describe_worktree()

    @on(Input.Changed)
    def _edited(self) -> None:
        """What was refused has been changed: the old reason no longer applies."""
        if self._refused is not None and self.request() != self._refused:
            self._error("")

    @on(OptionList.OptionSelected, "#recent-list")
    def _recent_picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.query_one("#folder", Input).value = event.option.id or ""
        self.query_one("#name", Input).focus()

    # ---- what the look at the folder found (folder_dialog.py looks) ---------------
    def _show_folder(self, info: FolderInfo | None, problem: str) -> None:
        note = self.query_one("#folder-note", Static)
        note.set_class(bool(problem), "-error")
        git_box = self.query_one("#git-box")
        git_box.display = info is not None and info.is_git
        if info is None:
            note.update(f"✗ {problem}")
            return
        if not info.is_git:
            note.update("Not in a git repository: the session works in this folder as it is.")
            return
        note.update(f"In the git repository {info.repo}")
        if info.branch:
            where = f"The checkout is on {info.branch}"
        elif info.head:
            where = f"HEAD is detached at {info.head[:10]} (no branch is checked out)"
        else:
            where = "The repository has no commits yet"
        self.query_one("#git-note", Static).update(where + (", with uncommitted changes." if info.dirty else "."))
        self._follow_checkout(info)
        self._describe_worktree()

    def _describe_worktree(self) -> None:
        worktree = self.query_one("#worktree", RadioButton).value
        self.query_one("#worktree-fields").display = worktree
        info = self.folder_info
        note = self.query_one("#worktree-note", Static)
        note.display = worktree and info is not None
        if info is None or not worktree:
            return
        base = self._value("base").strip() or info.branch or info.head[:10]
        lines = [f"A worktree of its own on {self._value('branch').strip() or '?'}, starting from {base}."]
        if info.dirty:
            lines.append(f"Uncommitted changes stay in {info.repo}; the worktree starts from {base}.")
        if not info.branch and info.head:
            lines.append(f"HEAD is detached: name a base branch, or the worktree starts from {info.head[:10]}.")
        note.update("\n".join(lines))

    # ---- create and cancel ---------------------------------------------------------
    def request(self, isolation: Isolation | None = None, sandbox: SandboxMode | None = None) -> NewSession | None:
        """What the dialog would create now (None when no agent can start); ``isolation``,
        ``sandbox``: a choice just taken by Enter, before the radio buttons say so."""
        agent = self.agent
        if agent is None:
            return None
        if isolation is None or not self.query_one("#git-box").display:
            isolation = self.isolation
        worktree = isolation is Isolation.WORKTREE
        return NewSession(
            agent=agent,
            name=self._value("name").strip() or None,
            folder=self._value("folder").strip(),
            isolation=isolation,
            branch=self._value("branch").strip() if worktree else "",
            base=self._value("base").strip() if worktree else "",
            sandbox=Sandbox(sandbox) if sandbox is not None else self.query_one(SandboxChoice).asked(),
        )

    def _error(self, problem: str) -> None:
        self._refused = self.request() if problem else None
        error = self.query_one("#new-session-error", Static)
        error.update(f"✗ {problem}" if problem else "")
        error.display = bool(problem)
        if problem:  # the dialog can be taller than the terminal: a refusal below the fold is unseen
            error.scroll_visible(animate=False)

    @on(OptionList.OptionSelected, "#agent-list")
    @on(Input.Submitted)
    @on(Button.Pressed, "#new-session-create")
    def action_create(self) -> None:
        """Check the request (in a worker) and close with it when nothing stands in the way."""
        self._create(None)

    @on(EnterChoice.Taken, "#isolation")
    def _choice_taken(self, event: EnterChoice.Taken) -> None:
        self._create(Isolation.WORKTREE if event.taken == "worktree" else Isolation.FOLDER)

    @on(EnterChoice.Taken, "#sandbox")
    def _sandbox_taken(self, event: EnterChoice.Taken) -> None:
        self._create(None, self.query_one(SandboxChoice).take(event.taken))

    def _create(self, isolation: Isolation | None, sandbox: SandboxMode | None = None) -> None:
        if self.checking:
            return
        request = self.request(isolation, sandbox)
        if request is None:
            self._error("No agent can start here: `polypilot agents` says what each needs.")
            return
        self.checking = True
        self.run_worker(self._check_then_close(request), group="check", exclusive=True, exit_on_error=False)

    async def _check_then_close(self, request: NewSession) -> None:
        try:
            checked = await attempt(log, "the new session's check", self._check(request))
        finally:
            self.checking = False
        problem = checked.said if isinstance(checked, Failed) else checked  # shown in the dialog
        if problem:
            self._error(problem)
        else:
            self.dismiss(request)

    @on(Button.Pressed, "#new-session-cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
