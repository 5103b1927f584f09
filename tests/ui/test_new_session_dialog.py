"""The new-session dialog on real folders and real git repositories, driven by keys and clicks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from msgspec import structs
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, RadioButton, Static

from polypilot_tui.domain.agents import AgentOffer, Availability
from polypilot_tui.domain.workspace import Isolation, Workspace
from polypilot_tui.engine.verbs import NewSession
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.screens.new_session import NewSessionScreen
from polypilot_tui.ui.screens.rename import RenameScreen
from polypilot_tui.workspace.worktrees import inspect_folder
from tests.ui.helpers import demo_app, engine_of, notifications, wait_for
from tests.workspace.repos import IDENTITY, make_repo, run


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)


async def open_dialog(pilot: Pilot[Any], app: PolypilotApp, folder: Path) -> NewSessionScreen:
    """ctrl+n with ``folder`` as the launch folder; returns the dialog once it has looked at it."""
    app.dashboard.new_session.launch_folder = str(folder)
    await wait_for(pilot, lambda: app.selected is not None)
    await pilot.press("ctrl+n")
    await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen), what="the dialog")
    screen = app.screen
    assert isinstance(screen, NewSessionScreen)
    await wait_for(pilot, lambda: screen.inspected == str(folder), what="the folder looked at")
    return screen


def text_of(screen: NewSessionScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def set_input(pilot: Pilot[Any], screen: NewSessionScreen, input_id: str, value: str) -> None:
    screen.query_one(f"#{input_id}", Input).value = value
    await pilot.pause()


async def test_a_plain_folder_offers_no_isolation_and_the_session_works_there(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(120, 44)) as pilot:
        screen = await open_dialog(pilot, app, plain)
        assert not screen.query_one("#git-box").display
        assert "Not in a git repository" in text_of(screen, "#folder-note")
        await pilot.press("enter")  # on the agent list, as before: Enter creates
        await wait_for(pilot, lambda: engine_of(app).manager.ids() == ["s1", "s2"], what="the session")
        session = engine_of(app).manager.session("s2")
        assert session.workspace == Workspace(str(plain.resolve()))
        assert session.cwd == str(plain.resolve())
        assert app.selected == "s2"


async def test_in_the_checkout_the_session_works_in_place_on_its_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "README.md").write_text("changed\n")  # uncommitted: said, and they stay
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(120, 44)) as pilot:
        screen = await open_dialog(pilot, app, repo)
        assert screen.query_one("#git-box").display
        assert "on main, with uncommitted changes" in text_of(screen, "#git-note")
        assert screen.query_one("#base", Input).value == "main"
        await set_input(pilot, screen, "name", "docs pass")
        await pilot.click("#new-session-create")
        await wait_for(pilot, lambda: "s2" in engine_of(app).manager.ids(), what="the session")
        workspace = engine_of(app).manager.session("s2").workspace
        assert workspace is not None
        assert (workspace.folder, workspace.isolation, workspace.repo, workspace.branch) == (
            str(repo.resolve()),
            Isolation.FOLDER,
            str(repo.resolve()),
            "main",
        )
        assert engine_of(app).manager.view("s2").name == "docs pass"


async def test_a_new_worktree_is_made_kept_across_a_restart_and_the_folder_is_offered_again(
    tmp_path: Path,
) -> None:
    from polypilot_tui.engine.persistence import attach_persistence

    repo = make_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("mine\n")
    app = demo_app(tmp_path / "state", attach=attach_persistence)
    async with app.run_test(size=(120, 44)) as pilot:
        screen = await open_dialog(pilot, app, repo)
        await pilot.click("#worktree")
        await wait_for(pilot, lambda: screen.query_one("#worktree-fields").display, what="branch and base")
        await set_input(pilot, screen, "name", "Fix the login")
        assert screen.query_one("#branch", Input).value == "polypilot/fix-the-login"
        note = text_of(screen, "#worktree-note")
        assert f"Uncommitted changes stay in {repo.resolve()}; the worktree starts from main." in note
        await pilot.click("#new-session-create")
        await wait_for(pilot, lambda: "s2" in engine_of(app).manager.ids(), what="the session")
        workspace = engine_of(app).manager.session("s2").workspace
        assert workspace is not None and workspace.isolation is Isolation.WORKTREE
        assert (workspace.branch, workspace.base, workspace.repo) == ("polypilot/fix-the-login", "main", str(repo))
        folder = Path(workspace.folder)
        assert folder.is_dir() and folder.is_relative_to(tmp_path / "state" / "worktrees")
        assert run(folder, "branch", "--show-current") == "polypilot/fix-the-login"
        assert not (folder / "notes.txt").exists()  # uncommitted changes stayed in the checkout
        assert str(folder) in run(repo, "worktree", "list")
    again = demo_app(tmp_path / "state", attach=attach_persistence)
    async with again.run_test(size=(120, 44)) as pilot:
        await wait_for(pilot, lambda: engine_of(again).manager.ids() == ["s1", "s2"], what="both sessions back")
        assert engine_of(again).manager.session("s2").workspace == workspace
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        screen = await open_dialog(pilot, again, elsewhere)
        recent = screen.query_one("#recent-list", OptionList)
        assert [recent.get_option_at_index(i).id for i in range(recent.option_count)] == [str(repo.resolve())]
        recent.focus()
        recent.highlighted = 0
        await pilot.press("enter")  # picks the folder, does not create
        await wait_for(pilot, lambda: screen.inspected == str(repo.resolve()), what="the recent folder looked at")
        assert screen.query_one("#git-box").display and isinstance(again.screen, NewSessionScreen)


async def test_problems_are_shown_inline_and_keep_what_was_typed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run(repo, "branch", "taken")
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(120, 44)) as pilot:
        screen = await open_dialog(pilot, app, repo)
        await pilot.click("#worktree")
        await set_input(pilot, screen, "name", "my session")
        await set_input(pilot, screen, "branch", "taken")
        await pilot.click("#new-session-create")
        await wait_for(pilot, lambda: "exists already" in text_of(screen, "#new-session-error"), what="branch exists")
        await set_input(pilot, screen, "branch", "fresh")
        await wait_for(pilot, lambda: text_of(screen, "#new-session-error") == "", what="the stale error gone")
        await set_input(pilot, screen, "base", "no-such-base")
        await pilot.click("#new-session-create")
        await wait_for(pilot, lambda: "'no-such-base' is neither" in text_of(screen, "#new-session-error"))
        missing = tmp_path / "missing"
        await set_input(pilot, screen, "folder", str(missing))
        await wait_for(pilot, lambda: screen.inspected == str(missing), what="the missing folder looked at")
        assert "does not exist" in text_of(screen, "#folder-note")
        assert not screen.query_one("#git-box").display
        await pilot.click("#new-session-create")
        await wait_for(pilot, lambda: "does not exist" in text_of(screen, "#new-session-error"))
        assert app.screen is screen and engine_of(app).manager.ids() == ["s1"]
        assert screen.query_one("#name", Input).value == "my session"
        assert screen.query_one("#branch", Input).value == "fresh"
        assert not list((tmp_path / "state").glob("worktrees/*/*"))


async def test_a_failure_after_the_check_reopens_the_dialog_with_everything(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    app = demo_app(tmp_path / "state")

    async def nothing_wrong(request: NewSession) -> None:
        return None  # the branch appears between the check and the creation

    async with app.run_test(size=(120, 44), notifications=True) as pilot:
        engine_of(app).check_new_session = nothing_wrong  # type: ignore[method-assign]
        screen = await open_dialog(pilot, app, repo)
        await pilot.click("#worktree")
        await set_input(pilot, screen, "name", "race")
        run(repo, "branch", "polypilot/race")
        await pilot.click("#new-session-create")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen) and app.screen is not screen)
        again = app.screen
        assert isinstance(again, NewSessionScreen)
        await wait_for(pilot, lambda: again.inspected == str(repo), what="the folder looked at again")
        assert "exists already" in text_of(again, "#new-session-error")
        assert any("was not created" in n for n in notifications(app))
        assert again.request() == NewSession("demo", "race", str(repo), Isolation.WORKTREE, "polypilot/race", "main")
        assert engine_of(app).manager.ids() == ["s1"]


async def test_escape_cancels_and_f4_renames(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await open_dialog(pilot, app, tmp_path)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, NewSessionScreen))
        assert engine_of(app).manager.ids() == ["s1"]
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, RenameScreen), what="the rename dialog")
        assert app.screen.query_one(Input).value == engine_of(app).manager.view("s1").name
        await pilot.press(*"api", "enter")  # the name is selected: typing replaces it
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").name == "api", what="renamed")
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, RenameScreen))
        await pilot.press("x", "escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, RenameScreen))
        assert engine_of(app).manager.view("s1").name == "api"


@dataclass
class EnterPressed:
    """What Enter did on one control of the dialog."""

    closed: bool
    request: NewSession | None
    folder: str
    """The folder field afterwards."""
    chain: list[str]
    """The controls the keyboard could reach (ids), in order, before Enter."""


async def enter_on(tmp_path: Path, repo: Path, prepare: Any, target: Any) -> EnterPressed:
    """Open the dialog on ``repo`` (a recent folder listed), ``prepare`` it, put the keyboard on
    the control ``target`` picks, press Enter and see what it did."""
    results: list[NewSession | None] = []
    other = tmp_path / "other"
    other.mkdir(exist_ok=True)

    async def no_problem(request: NewSession) -> str:
        return ""

    screen = NewSessionScreen(
        [AgentOffer("demo", "demo", Availability.READY, where="built in")],
        "demo",
        folder=str(repo),
        inspect=inspect_folder,
        check=no_problem,
        recent=[str(other)],
    )
    app: App[None] = App()
    async with app.run_test(size=(100, 50)) as pilot:
        await app.push_screen(screen, results.append)
        await wait_for(pilot, lambda: screen.inspected == str(repo), what="the folder looked at")
        await prepare(pilot, screen)
        chain = [w.id or type(w).__name__ for w in screen.focus_chain]
        widget = target(screen)
        widget.focus()
        await wait_for(pilot, lambda: screen.focused is widget, what="the keyboard on the control")
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(results) or screen.focused is not widget, timeout=2, what="an answer")
        folder = "" if results else screen.query_one("#folder", Input).value
        return EnterPressed(bool(results), results[0] if results else None, folder, chain)


async def as_is(pilot: Pilot[Any], screen: NewSessionScreen) -> None:
    return None


async def worktree_chosen(pilot: Pilot[Any], screen: NewSessionScreen) -> None:
    screen.query_one("#worktree", RadioButton).value = True
    await wait_for(pilot, lambda: screen.query_one("#branch").display, what="the worktree fields")


@pytest.mark.parametrize("prepare", [as_is, worktree_chosen], ids=["checkout", "worktree"])
async def test_enter_creates_from_every_control_or_does_what_the_control_does(tmp_path: Path, prepare: Any) -> None:
    """Every control the keyboard can reach answers Enter: it creates the session, or (a recent
    folder, Cancel) does what that control says. On the checkout/worktree choice it did nothing."""
    repo = make_repo(tmp_path / "repo")
    chain = (await enter_on(tmp_path, repo, prepare, lambda s: s.query_one("#name"))).chain
    assert {"agent-list", "folder", "recent-list", "name", "isolation", "new-session-create"} <= set(chain)
    assert {"branch", "base"} <= set(chain) or prepare is as_is
    wanted = Isolation.WORKTREE if prepare is worktree_chosen else Isolation.FOLDER
    for index, name in enumerate(chain):
        did = await enter_on(tmp_path, repo, prepare, lambda s, i=index: s.focus_chain[i])
        if name == "recent-list":  # takes the folder, and goes on to the name
            assert not did.closed and did.folder == str(tmp_path / "other"), name
        elif name == "new-session-cancel":
            assert did.closed and did.request is None
        else:
            assert did.closed and did.request is not None, name
            assert did.request.isolation is wanted and did.request.folder == str(repo), name


async def test_enter_on_the_choice_takes_the_highlighted_one(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")

    async def highlight_worktree(pilot: Pilot[Any], screen: NewSessionScreen) -> None:
        screen.query_one("#isolation").focus()
        await pilot.press("down")  # highlighted, not taken yet
        assert screen.isolation is Isolation.FOLDER

    did = await enter_on(tmp_path, repo, highlight_worktree, lambda s: s.query_one("#isolation"))
    assert did.closed and did.request is not None and did.request.isolation is Isolation.WORKTREE
    assert did.request.branch == "polypilot/demo" and did.request.base == "main"


async def test_the_sandbox_follows_the_agent_until_chosen_and_enter_on_it_creates(tmp_path: Path) -> None:
    """The choice shows the highlighted agent's own sandbox and sends none (the agent's default
    applies) until the user picks another; Enter on the choice takes the highlighted one."""
    from polypilot_tui.domain.sandbox import Sandbox, SandboxMode

    folder = tmp_path / "plain"
    folder.mkdir()
    results: list[NewSession | None] = []

    async def no_problem(request: NewSession) -> str:
        return ""

    offers = [
        AgentOffer("boxed", "acp", Availability.READY, where="/bin/boxed", sandbox=SandboxMode.WORKSPACE),
        AgentOffer("demo", "demo", Availability.READY, where="built in"),
    ]
    screen = NewSessionScreen(offers, "boxed", folder=str(folder), inspect=inspect_folder, check=no_problem)
    app: App[None] = App()
    async with app.run_test(size=(100, 50)) as pilot:
        await app.push_screen(screen, results.append)
        await wait_for(pilot, lambda: screen.inspected == str(folder), what="the folder looked at")
        assert screen.sandbox_mode is SandboxMode.WORKSPACE  # boxed's own
        request = screen.request()
        assert request is not None and request.sandbox is None
        screen.query_one("#agent-list", OptionList).highlighted = 1  # demo: off by default
        await wait_for(pilot, lambda: screen.sandbox_mode is SandboxMode.OFF, what="demo's own sandbox")
        screen.query_one("#sandbox-workspace", RadioButton).value = True  # the user's choice
        await pilot.pause()
        request = screen.request()
        assert request is not None and request.sandbox == Sandbox(SandboxMode.WORKSPACE)
        screen.query_one("#agent-list", OptionList).highlighted = 0
        await pilot.pause()
        screen.query_one("#agent-list", OptionList).highlighted = 1
        await pilot.pause()
        assert screen.sandbox_mode is SandboxMode.WORKSPACE  # kept: chosen, not followed
        choice = screen.query_one("#sandbox")
        choice.focus()
        await pilot.pause()
        await pilot.press("left")  # highlight "off", then Enter takes it and creates
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(results), what="the request")
    assert results[0] is not None and results[0].agent == "demo"
    assert results[0].sandbox == Sandbox(SandboxMode.OFF)


async def test_the_dialog_starts_on_the_sandbox_of_the_agents_file_entry(tmp_path: Path) -> None:
    """An agent whose entry says ``sandbox = "workspace"`` is offered with it (agents/readiness.py),
    so the dialog shows it chosen; creating without touching it makes a sandboxed session."""
    from polypilot_tui.domain.sandbox import SandboxMode

    plain = tmp_path / "plain"
    plain.mkdir()
    app = demo_app(tmp_path / "state")
    agents = engine_of(app).manager.catalog.agents
    agents["demo"] = structs.replace(agents["demo"], **{"sandbox": "workspace"})
    async with app.run_test(size=(120, 44)) as pilot:
        screen = await open_dialog(pilot, app, plain)
        assert screen.sandbox_mode is SandboxMode.WORKSPACE
        await pilot.press("enter")
        await wait_for(pilot, lambda: "s2" in engine_of(app).manager.ids(), what="the session")
        assert engine_of(app).manager.session("s2").sandbox.on


async def test_a_refusal_is_scrolled_into_view_in_a_dialog_taller_than_the_terminal(tmp_path: Path) -> None:
    """At 160×45 a dialog with a repository's choices is taller than the terminal: Enter on the
    sandbox choice (or on the agent list) creates, and the refusal (bwrap missing, here) must be
    seen, not lie below the fold."""
    repo = make_repo(tmp_path / "repo")
    said = "the session cannot run sandboxed here: bubblewrap (bwrap) is not installed"

    async def refused(request: NewSession) -> str:
        return said

    offers = [AgentOffer(f"agent-{i}", "acp", Availability.READY, where="/bin/true") for i in range(8)]
    screen = NewSessionScreen(offers, "agent-0", folder=str(repo), inspect=inspect_folder, check=refused)
    app: App[None] = App()
    async with app.run_test(size=(160, 45)) as pilot:
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.inspected == str(repo), what="the repository looked at")
        await pilot.click("#worktree")  # the branch fields too: taller still
        for start in ("#sandbox", "#agent-list"):
            screen.query_one(start).focus()
            await pilot.pause()
            await pilot.press("enter")
            error = screen.query_one("#new-session-error", Static)
            await wait_for(pilot, lambda e=error: said in str(e.render()) and not screen.checking, what="the refusal")
            await pilot.pause()
            dialog = screen.query_one("#new-session-dialog")
            seen = error.region.intersection(dialog.scrollable_content_region)
            assert seen == error.region and seen.height > 0, (start, error.region, dialog.scrollable_content_region)
            assert app.screen is screen
