"""Fan-out from the dashboard and the compare view, on the demo agent and real git repositories.

ctrl+f opens the fan-out dialog (task, agents as ``demo:2`` or picked from the list, folder,
base, check); what stands in the way is said in it and nothing typed is lost. A fan-out opens
the compare view of its attempts: ``c`` runs the check, Enter opens an attempt's diff (the
review screen), ``m`` merges the highlighted one after asking whether to discard the others.
The demo agent writes no files: the test writes an attempt's work into its worktree.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, OptionList, Static, TextArea

from polypilot_tui.domain.fan_out import CheckResult
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.screens.compare import CompareScreen
from polypilot_tui.ui.screens.confirm import ConfirmScreen
from polypilot_tui.ui.screens.diff_view import DiffViewScreen
from polypilot_tui.ui.screens.fan_out import FanOutScreen
from polypilot_tui.ui.screens.pick_confirm import PickConfirmScreen
from tests.snapshots.fakes import COMPARED
from tests.ui.helpers import demo_app, engine_of, notifications, screen_text, wait_for, widget_lines
from tests.workspace.repos import IDENTITY, make_repo, run


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)


def shown(screen: Any, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def open_dialog(pilot: Pilot[Any], app: PolypilotApp) -> FanOutScreen:
    await wait_for(pilot, lambda: app.selected == "s1")
    await pilot.press("ctrl+f")
    await wait_for(pilot, lambda: isinstance(app.screen, FanOutScreen), what="the fan-out dialog")
    screen = app.screen
    assert isinstance(screen, FanOutScreen)
    return screen


def fill(screen: FanOutScreen, task: str, agents: str, folder: str, check: str = "") -> None:
    screen.query_one("#task", TextArea).load_text(task)
    screen.query_one("#agents", Input).value = agents
    screen.query_one("#folder", Input).value = folder
    screen.query_one("#check", Input).value = check


async def test_the_dialog_says_what_stands_in_the_way_and_keeps_what_was_typed(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    repo = make_repo(tmp_path / "repo")
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(110, 44)) as pilot:
        screen = await open_dialog(pilot, app)
        for agents, said in [
            ("demo:0", "'demo:0'"),  # the spec's own words name the part that is wrong
            ("nope:2", "'nope' is not an agent polypilot knows"),
            ("", "name the agents"),
        ]:
            fill(screen, "fix the bug", agents, str(repo))
            await pilot.press("ctrl+s")
            await wait_for(pilot, lambda said=said: said in shown(screen, "#new-session-error"), what=said)
            assert app.screen is screen and screen.query_one("#task", TextArea).text == "fix the bug"
        fill(screen, "fix the bug", "demo:2", str(plain))
        await wait_for(pilot, lambda: "Not in a git repository" in shown(screen, "#folder-note"), what="the note")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: "not in a git repository" in shown(screen, "#new-session-error"))
        # Picking an agent in the list adds one attempt of it.
        fill(screen, "fix the bug", "demo:1", str(repo))
        screen.query_one("#agent-list", OptionList).focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.query_one("#agents", Input).value == "demo:2", what="demo:1 → demo:2")
        await wait_for(pilot, lambda: screen.query_one("#base", Input).value == "main", what="the base from git")
        assert engine_of(app).ids() == ["s1"]  # nothing was made


async def test_fan_out_compare_check_diff_and_merge_one_discarding_the_other(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    app = demo_app(tmp_path / "state")
    engine = engine_of(app)
    async with app.run_test(size=(130, 44)) as pilot:
        screen = await open_dialog(pilot, app)
        fill(screen, "hi there", "demo:2", str(repo), check="test -f answer.txt")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), what="the compare view")
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        attempts = [sid for sid in engine.ids() if engine.view(sid).attempt_of]
        assert len(attempts) == 2 and compare.query_one(DataTable).row_count == 2

        def checks() -> list[str]:
            table = compare.query_one(DataTable)
            return [str(table.get_cell_at((row, 5))) for row in range(table.row_count)]

        # Each attempt's check ran at its turn's end (no answer.txt yet: it fails).
        await wait_for(pilot, lambda: all(c.startswith("✗ exit 1") for c in checks()), what="the checks at the end")
        first = compare.comparison.attempts[0]
        Path(first.folder, "answer.txt").write_text("42\n")
        await pilot.press("c")
        await wait_for(pilot, lambda: checks()[0].startswith("✓ passed"), what="the check run again")
        assert checks()[1].startswith("✗ exit 1")
        await wait_for(
            pilot, lambda: "has ended in every worktree" in shown(compare, "#compare-result"), what="the end said"
        )
        # Enter: the first attempt's diff, in the review screen; Esc comes back here.
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffViewScreen), what="the diff")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is compare)
        # m: asked; "n" merges nothing.
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, PickConfirmScreen))
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is compare)
        assert not (repo / "answer.txt").exists()
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, PickConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: "Merged “" in shown(compare, "#compare-result"), what="the merge said")
        said = shown(compare, "#compare-result")
        assert "Discarded: " in said, said
        assert (repo / "answer.txt").read_text() == "42\n"
        other = compare.comparison.attempts[1]
        assert not Path(other.folder).exists()
        assert run(repo, "branch", "--list", other.branch) == ""
        await wait_for(pilot, lambda: "★ merged" in str(compare.query_one(DataTable).get_cell_at((0, 0))))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.dashboard)
        # F9 on an attempt brings the view back.
        app.select(first.session_id)
        await app.dashboard.flush()
        await pilot.press("f9")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), what="F9's compare view")


async def test_attempts_kept_for_their_work_are_discarded_after_a_second_question_naming_it(tmp_path: Path) -> None:
    """What a fan-out's other attempts usually hold is uncommitted files: "merge, discard
    others" keeps them (work at risk) and then asks, naming that work, whether to discard them
    anyway; "y" removes their worktrees and branches."""
    repo = make_repo(tmp_path / "repo")
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(130, 44)) as pilot:
        screen = await open_dialog(pilot, app)
        fill(screen, "hi there", "demo:3", str(repo))
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), what="the compare view")
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        await wait_for(pilot, lambda: len(compare.comparison.attempts) == 3, what="three attempts")
        first, second, third = compare.comparison.attempts
        for attempt_ in (first, second, third):  # each attempt wrote its own answer
            Path(attempt_.folder, "answer.txt").write_text(f"{attempt_.name}\n")
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, PickConfirmScreen))
        assert "Merge, discard others [y]" in screen_text(app)  # the third button whole, with its key
        await pilot.press("y")
        await wait_for(pilot, lambda: type(app.screen) is ConfirmScreen, what="the second question")
        question = screen_text(app)
        assert "Discard 2 kept attempts anyway?" in question and "answer.txt" in question, question
        await pilot.press("y")
        await wait_for(pilot, lambda: app.screen is compare)
        await wait_for(pilot, lambda: "Discarded “" in shown(compare, "#compare-result"), what="the discard said")
        assert (repo / "answer.txt").read_text() == f"{first.name}\n"
        for kept in (second, third):
            assert not Path(kept.folder).exists()
            assert run(repo, "branch", "--list", kept.branch) == ""


async def test_f9_on_a_session_of_no_fan_out_does_nothing(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(110, 30)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        assert app.dashboard.check_action("compare", ()) is False  # hidden from the footer too
        await pilot.press("f9")
        await pilot.pause()
        assert app.screen is app.dashboard


async def test_a_group_the_engine_does_not_know_is_said_not_shown(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(110, 30), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        app.dashboard.compare.open("no-such-group")
        await wait_for(pilot, lambda: any("cannot be compared" in n for n in notifications(app)))
        assert app.screen is app.dashboard


async def test_names_and_errors_in_the_table_are_shown_as_written_never_as_markup(tmp_path: Path) -> None:
    first = replace(COMPARED.attempts[0], name="[bold]x[/bold]", check=CheckResult(None, "", 0.0, error="[red]boom"))
    comparison = replace(COMPARED, attempts=(first,))
    app = demo_app(tmp_path)
    async with app.run_test(size=(130, 30)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        screen = CompareScreen(comparison, open_diff=lambda sid: None, run_check=lambda: None, pick=lambda a: None)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: app.screen is screen)
        drawn = "\n".join(widget_lines(screen.query_one(DataTable)))  # the table alone, as drawn
        assert "[bold]x[/bold]" in drawn and "[red]boom" in drawn


async def test_a_fan_out_the_engine_refuses_comes_back_with_its_reason_and_everything_typed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    app = demo_app(tmp_path / "state")
    async with app.run_test(size=(110, 44), notifications=True) as pilot:
        screen = await open_dialog(pilot, app)
        fill(screen, "fix the bug", "demo:2", str(repo), check="pytest -q")
        await wait_for(pilot, lambda: screen.query_one("#base", Input).value == "main", what="the base from git")
        screen.query_one("#base", Input).value = "no-such-branch"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.screen is not screen and isinstance(app.screen, FanOutScreen), what="again")
        again = app.screen
        assert isinstance(again, FanOutScreen)
        await wait_for(pilot, lambda: "no-such-branch" in shown(again, "#new-session-error"), what="the reason")
        assert again.query_one("#task", TextArea).text == "fix the bug"
        assert [again.query_one(f"#{field}", Input).value for field in ("agents", "base", "check")] == [
            "demo:2",
            "no-such-branch",
            "pytest -q",
        ]
        assert engine_of(app).ids() == ["s1"]  # nothing was made
        assert any("Not fanned out" in n for n in notifications(app))


async def test_the_sandbox_of_the_attempts_is_the_agents_own_until_chosen(tmp_path: Path) -> None:
    """The choice shows ``workspace`` when every attempt's agent is sandboxed by its entry and
    sends none (each agent's own) until the user picks; a pick is sent, Enter on it fans out."""
    from textual.app import App
    from textual.widgets import RadioButton

    from polypilot_tui.domain.agents import AgentOffer, Availability
    from polypilot_tui.domain.sandbox import Sandbox, SandboxMode
    from polypilot_tui.engine.verbs import FanOut
    from polypilot_tui.workspace.worktrees import inspect_folder

    repo = make_repo(tmp_path / "repo")
    offers = [
        AgentOffer("boxed", "acp", Availability.READY, where="/bin/boxed", sandbox=SandboxMode.WORKSPACE),
        AgentOffer("demo", "demo", Availability.READY, where="built in"),
    ]
    results: list[FanOut | None] = []
    screen = FanOutScreen(offers, folder=str(repo), inspect=inspect_folder)
    app: App[None] = App()
    async with app.run_test(size=(100, 50)) as pilot:
        await app.push_screen(screen, results.append)
        fill(screen, "fix the bug", "boxed:2", str(repo))
        await wait_for(pilot, lambda: screen.sandbox_mode is SandboxMode.WORKSPACE, what="boxed's own sandbox")
        assert screen.request().sandbox is None  # not chosen: each agent's own
        fill(screen, "fix the bug", "boxed:1,demo:1", str(repo))
        await wait_for(pilot, lambda: screen.sandbox_mode is SandboxMode.OFF, what="demo's own: off")
        assert screen.request().sandbox is None  # boxed stays sandboxed, demo stays off
        screen.query_one("#sandbox-workspace", RadioButton).value = True  # the user's choice
        await pilot.pause()
        assert screen.request().sandbox == Sandbox(SandboxMode.WORKSPACE)
        fill(screen, "fix the bug", "demo:2", str(repo))
        await pilot.pause()
        assert screen.sandbox_mode is SandboxMode.WORKSPACE  # kept: chosen, not followed
        screen.query_one("#sandbox").focus()
        await pilot.pause()
        await pilot.press("left")  # highlight "off"; Enter takes it and fans out
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(results), what="the request")
    assert results[0] is not None and results[0].agents == ("demo", "demo")
    assert results[0].sandbox == Sandbox(SandboxMode.OFF)
