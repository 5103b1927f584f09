"""Deterministic states of issue 24 for snapshots: marked sessions, a team with a bound reached,
a fan-out's compare view and its dialog (virtual time, fixed ids and data)."""

from __future__ import annotations

from pathlib import Path

from polypilot_tui.domain.team import TeamBounds
from polypilot_tui.domain.tool_servers import CAPABILITY_ENV
from polypilot_tui.engine import verbs
from polypilot_tui.ui.screens.compare import CompareScreen
from polypilot_tui.ui.screens.fan_out import FanOutScreen
from tests.snapshots.fakes import COMPARED, Driver
from tests.ui.helpers import engine_of


async def marked_sessions(d: Driver) -> None:
    """Five sessions, three marked for a broadcast (one of them busy), one marked on screen."""
    ids = ["s1"] + [await d.add(name) for name in ("api", "web", "docs", "infra")]
    busy = ids[2]
    await d.send(busy, "run the tests")
    d.turn_start(busy)
    d.tool(busy, "bash", "pytest -q", output=None)
    for sid in (ids[1], busy, ids[4]):
        d.app.select(sid)
        await d.settle()
        d.app.dashboard.action_toggle_mark()
    await d.settle()


async def team_with_a_bound_reached(d: Driver) -> str:
    """An orchestrator (on the engine's own team desk, at most two workers at once) whose three
    workers are listed under it — one working, one blocked on a permission, one queued at the
    bound — and an unrelated session made before them; the orchestrator is on screen."""
    engine = engine_of(d.app)
    lead = await d.add("lead")
    other = await d.add("notes")
    await d.finished_turn(other, "summarise the notes", "Three notes, all about the login page.")
    if engine.teams.socket is None:  # in process nobody serves a socket (no relay starts here)
        engine.teams.socket = Path("/run/polypilot/engine.sock")
    await engine.call(verbs.ORCHESTRATE, verbs.Orchestrate(lead, TeamBounds(workers_at_once=2)))
    await d.settle()
    (relay,) = engine.teams.tool_servers(lead)
    capability = dict(relay.env)[CAPABILITY_ENV]
    await d.send(lead, "split the parser work between workers and review what they do")
    d.turn_start(lead)
    d.tool(lead, "polypilot-start_worker", "parser, tests, docs", output="3 workers")
    workers = []
    for name, task in (("parser", "refactor parse_line"), ("tests", "add tests for empty lines"), ("docs", "doc it")):
        start = verbs.StartWorker(capability, "demo", task, name=name)
        workers.append((await engine.call(verbs.TEAM_START, start)).worker)
        await d.settle()
    d.tool(lead, "polypilot-wait_workers", "wait for parser, tests", output=None)
    parser, tests, _docs = workers
    d.turn_start(parser)
    d.tool(parser, "bash", "pytest -q tests/test_parser.py", output="12 passed")
    d.tool(parser, "edit", "src/parser.py", output=None)
    d.turn_start(tests)
    call = d.tool(tests, "bash", "rm -rf build", output=None)
    d.ask_permission(tests, call, "Run shell command: rm -rf build", "rm -rf build")
    await d.advance(40)
    return lead


async def compare_view(d: Driver) -> None:
    """The compare view of a fan-out of three attempts (fixed: fakes.COMPARED), the one that
    failed its check highlighted."""
    d.app.dashboard.compare.open(COMPARED.group)
    while not isinstance(d.app.screen, CompareScreen):
        await d.pilot.pause(0.01)
    await d.settle()
    await d.pilot.press("down")
    await d.settle()


async def fan_out_dialog(d: Driver) -> None:
    """The fan-out dialog filled in on a git checkout (fixed folders: fakes.FOLDERS)."""
    d.app.dashboard.new_session.launch_folder = "/home/dev/polypilot"
    d.app.dashboard.action_fan_out()
    while not isinstance(d.app.screen, FanOutScreen):
        await d.pilot.pause(0.01)
    screen = d.app.screen
    while screen.inspected != "/home/dev/polypilot":
        await d.pilot.pause(0.01)
    screen.query_one("#task").load_text("Make the login page remember the user's last tab")  # type: ignore[attr-defined]
    screen.query_one("#agents").value = "demo:2,flaky:1"  # type: ignore[attr-defined]
    screen.query_one("#check").value = "pytest -q"  # type: ignore[attr-defined]
    await d.settle()
