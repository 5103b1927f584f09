"""An orchestrator and its workers in the dashboard, on the engine's own team desk and the demo agent.

Workers are listed under their orchestrator (└, their own status), the orchestrator counts
them and shows a bound reached in its row; ctrl+↑/↓ walk the list as drawn; the stop key on an
orchestrator offers to stop its workers too (STOP_WORKERS), and "no" leaves them working.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from polypilot_tui.domain.team import TeamBounds
from polypilot_tui.domain.tool_servers import CAPABILITY_ENV
from polypilot_tui.engine import verbs
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.screens.confirm import ConfirmScreen
from tests.ui.helpers import caught_up_with, demo_app, engine_of, notifications, session_added, wait_for


def rows(app: PolypilotApp) -> list[tuple[str, str]]:
    listed = app.sidebar.session_list
    return [r for sid in listed.session_ids if (r := listed.rendered(sid)) is not None]


async def team_of_two(pilot: Pilot[Any], app: PolypilotApp, tmp_path: Path, **bounds: Any) -> tuple[str, str]:
    """s1 leads a team (``bounds``); s2 is an unrelated session made before its two workers,
    which hang (their turns run until stopped). The workers' ids."""
    engine: LocalEngine = engine_of(app)
    await wait_for(pilot, lambda: app.selected == "s1")
    await session_added(pilot, "demo", name="other")
    if engine.teams.socket is None:  # in process nobody serves a socket; the relay is not started here
        engine.teams.socket = tmp_path / "engine.sock"
    await engine.call(verbs.ORCHESTRATE, verbs.Orchestrate("s1", TeamBounds(**bounds)))
    (relay,) = engine.teams.tool_servers("s1")
    capability = dict(relay.env)[CAPABILITY_ENV]
    workers = []
    for name in ("alpha", "beta"):
        state = await engine.call(verbs.TEAM_START, verbs.StartWorker(capability, "demo", "!hang", name=name))
        workers.append(state.worker)
    await caught_up_with(pilot)
    return workers[0], workers[1]


async def test_workers_are_listed_under_their_orchestrator_and_the_keys_walk_that_order(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        alpha, beta = await team_of_two(pilot, app, tmp_path)
        listed = app.sidebar.session_list
        await wait_for(pilot, lambda: listed.session_ids == ["s1", alpha, beta, "s2"], what="workers under s1")
        assert engine_of(app).ids() == ["s1", "s2", alpha, beta]  # the engine's own order is unchanged
        await wait_for(pilot, lambda: "2 workers" in rows(app)[0][1], what="the orchestrator's count")
        top, _ = rows(app)[1]
        assert top.lstrip().startswith("└") and "alpha" in top
        await wait_for(pilot, lambda: engine_of(app).view(beta).status.busy, what="beta working")
        assert rows(app)[2][0].lstrip().startswith("└") and not rows(app)[3][0].lstrip().startswith("└")
        await pilot.press("ctrl+down")
        await wait_for(pilot, lambda: app.selected == alpha, what="ctrl+down to the first worker")
        await pilot.press("ctrl+down", "ctrl+down")
        await wait_for(pilot, lambda: app.selected == "s2", what="past the workers to s2")
        # A mark stays on its session when the list moves: s2 goes down as a third worker comes.
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: "✓" in listed.rendered("s2")[0], what="s2 marked")
        (relay,) = engine_of(app).teams.tool_servers("s1")
        start = verbs.StartWorker(
            dict(relay.env)[CAPABILITY_ENV], "demo", "!hang on", name="gamma"
        )  # not a 3rd same dispatch
        gamma = (await engine_of(app).call(verbs.TEAM_START, start)).worker
        await wait_for(pilot, lambda: listed.session_ids == ["s1", alpha, beta, gamma, "s2"], what="gamma listed")
        assert "✓" in listed.rendered("s2")[0] and "✓" not in listed.rendered(gamma)[0]
        assert app.dashboard.marks.ids == {"s2"}


async def test_a_bound_reached_is_shown_on_the_orchestrators_row(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        alpha, beta = await team_of_two(pilot, app, tmp_path, workers_at_once=1)
        await wait_for(pilot, lambda: app.sidebar.session_list.session_ids[:3] == ["s1", alpha, beta])
        note = "workers at once: 1 of 1"
        await wait_for(pilot, lambda: note in engine_of(app).view("s1").team_note, what="the bound reached")
        await wait_for(pilot, lambda: note in rows(app)[0][1], what="the note in the row")
        assert rows(app)[0][1].lstrip().startswith("⚠")
        assert note in str(app.pane.header.render())  # whole, on screen with the orchestrator
        # beta waits for alpha's slot: its session is idle, its row says it is queued.
        await wait_for(pilot, lambda: "Queued: waits for a slot" in rows(app)[2][1], what="beta queued")
        assert "Queued" not in rows(app)[1][1]


async def test_stopping_an_orchestrator_offers_to_stop_its_workers(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        alpha, beta = await team_of_two(pilot, app, tmp_path)
        engine = engine_of(app)
        await wait_for(pilot, lambda: engine.view(alpha).status.busy and engine.view(beta).status.busy)
        app.select("s1")
        await app.dashboard.flush()
        # "No": the orchestrator's question goes, its workers keep working.
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        assert "2 working now" in str(app.screen.query_one("#confirm-message").render())
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is app.dashboard)
        assert engine.view(alpha).status.busy and engine.view(beta).status.busy
        # "Yes": both stopped, and said.
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question again")
        await pilot.press("y")
        await wait_for(pilot, lambda: not engine.view(alpha).status.busy and not engine.view(beta).status.busy)
        await wait_for(pilot, lambda: any("Stopped 2 workers" in n for n in notifications(app)))


async def test_the_stop_key_on_a_plain_idle_session_asks_nothing(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await pilot.press("ctrl+x")
        await pilot.pause()
        assert app.screen is app.dashboard


async def test_make_orchestrator_from_the_palette_makes_the_session_on_screen_lead_a_team(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        other = await session_added(pilot, "demo", name="lead")
        app.select(other)
        await app.dashboard.flush()
        command = next(c for c in app.dashboard.commands() if c.title == "Make orchestrator")
        command.callback()
        await wait_for(pilot, lambda: engine_of(app).view(other).orchestrator, what="the team made")
        assert not engine_of(app).view("s1").orchestrator
        await wait_for(pilot, lambda: any("“lead” leads a team" in n for n in notifications(app)))


async def test_a_workers_permission_is_answered_by_key_and_its_orchestrator_sees_it_blocked_then_done(
    tmp_path: Path,
) -> None:
    """Nothing answers a worker's permission for the human: the orchestrator's wait says
    "blocked"; ctrl+g from the orchestrator's screen jumps to the worker's card, y allows it,
    and the orchestrator's next wait returns the worker's own end."""
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        engine = engine_of(app)
        await wait_for(pilot, lambda: app.selected == "s1")
        engine.teams.socket = tmp_path / "engine.sock"
        await engine.call(verbs.ORCHESTRATE, verbs.Orchestrate("s1"))
        (relay,) = engine.teams.tool_servers("s1")
        capability = dict(relay.env)[CAPABILITY_ENV]
        start = verbs.StartWorker(capability, "demo", "!permission", name="asker")
        worker = (await engine.call(verbs.TEAM_START, start)).worker
        wait = verbs.WaitWorkers(capability, (worker,), "blocked", 30.0)
        (blocked,) = await engine.call(verbs.TEAM_WAIT, wait)
        assert blocked.state == "blocked" and engine.view(worker).pending_permission is not None
        await caught_up_with(pilot)
        assert app.selected == "s1"  # the human is on the orchestrator's screen
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: app.selected == worker, what="ctrl+g to the worker that needs you")
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: app.pane.permission.has_focus_within, what="the keyboard on its card")
        await pilot.press("y")
        done = verbs.WaitWorkers(capability, (worker,), "done", 30.0)
        (ended,) = await engine.call(verbs.TEAM_WAIT, done)
        assert (ended.state, ended.outcome) == ("done", "completed")
        reply = await engine.call(verbs.TEAM_READ, verbs.WorkerRef(capability, worker))
        assert "notes.txt" in reply.text
