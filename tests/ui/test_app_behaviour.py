"""App behaviour on virtual time: heartbeat, coalescing, alerts, workers, notices, themes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from polypilot_tui.domain.records import ActionTaken
from polypilot_tui.domain.view import SessionStatus
from polypilot_tui.ui.formatting import UNREAD_MARK
from tests.snapshots import scenarios
from tests.snapshots.fakes import Driver, WedgedBackend, build_app
from tests.ui.helpers import engine_of, notifications, wait_for


def row_status(app: Any, sid: str) -> str:
    """The compact status line of a session's row, as drawn."""
    entry = app.sidebar.session_list.entry(sid)
    assert entry is not None, f"no row for {sid}"
    assert app.sidebar.session_list.rendered(sid)[1].strip() == entry.status_text
    return entry.status_text


async def running_a_tool(pilot: Any) -> Driver:
    """s1 in a turn running bash, drawn."""
    d = Driver(pilot)
    await d.settle()
    await d.send("s1", "run tests")
    d.turn_start("s1")
    d.tool("s1", "bash", "pytest", output=None)
    await d.settle()
    return d


async def test_heartbeat_refreshes_ago_labels_from_the_injected_clock(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = await running_a_tool(pilot)
        assert row_status(app, "s1") == "0s · 1 tool"
        await d.clock.advance(45)
        assert row_status(app, "s1") == "0s · 1 tool"  # nothing redraws by itself
        await app.dashboard.heartbeat()
        await d.settle()
        assert row_status(app, "s1") == "45s · 1 tool · quiet 45s"
        assert str(app.pane.status.render()).endswith("Working… · 45s · 1 tool call · running bash · quiet for 45s")


async def test_a_burst_of_deltas_is_one_redraw(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        await d.send("s1", "go")
        d.turn_start("s1")
        await d.settle()
        before = app.dashboard.redraws
        for i in range(200):
            d.stream("s1", f"w{i} ")
        await d.settle()
        assert app.dashboard.redraws - before <= 3
        assert app.pane.log_for("s1").streaming.rstrip().endswith("w199")


async def test_a_redraw_made_directly_leaves_no_coalesced_one_behind(tmp_path: Path) -> None:
    """A change arms the coalesced redraw (a real-time timer); a flush made before it fires
    (the heartbeat's, a test's) draws the change, and the timer then draws nothing again: it
    redrew every row at whatever time it fired (a CI run saw a row's "0s" turn "15s")."""
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = await running_a_tool(pilot)
        before = app.dashboard.redraws
        await pilot.pause(0.3)  # six coalescing intervals of real time
        assert app.dashboard.redraws == before
        d.stream("s1", "more")
        await pilot.pause(0.3)
        assert app.dashboard.redraws == before + 1  # a change still comes by itself
        assert app.pane.log_for("s1").streaming.rstrip().endswith("more")


async def test_bell_and_toast_only_for_sessions_off_screen_and_only_once(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    bells: list[int] = []
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        app.bell = lambda: bells.append(1)  # type: ignore[method-assign]
        d = Driver(pilot)
        await d.settle()
        await d.finished_turn("s1", "hi", "hello")  # on screen: silent
        await d.settle()
        assert bells == [] and not notifications(app)
        sid = await d.add("worker")
        app.select("s1")
        await d.send(sid, "write")
        d.turn_start(sid)
        call = d.tool(sid, "bash", "touch x", output=None)
        d.ask_permission(sid, call, "Run shell command: touch x")
        await d.settle()
        assert len(bells) == 1 and any("worker needs permission" in n for n in notifications(app))
        await app.dashboard.heartbeat()
        await d.settle()
        assert len(bells) == 1  # the same request never pings twice
        await engine_of(app).manager.answer_permission(
            sid, engine_of(app).manager.view(sid).pending_permission.request_id, "allow_once"
        )
        d.say(sid, "done")
        d.idle(sid)
        await d.settle()
        assert len(bells) == 2 and any("worker finished" in n for n in notifications(app))
        assert app.sidebar.session_list.entry(sid).unread
        assert app.sidebar.session_list.rendered(sid)[0].rstrip().endswith(UNREAD_MARK)


async def test_stop_on_a_wedged_agent_runs_in_a_worker_and_leaves_a_usable_session(tmp_path: Path) -> None:
    wedged: list[WedgedBackend] = []

    def factory(agent: str, sink: Any, workdir: Path) -> WedgedBackend:
        wedged.append(WedgedBackend(sink))
        return wedged[-1]

    app = build_app(tmp_path, stop_grace_seconds=5.0, backend_factory=factory)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        engine_of(app).manager.add_session("demo", name="other")
        await d.send("s1", "long job")
        d.turn_start("s1")
        await d.settle()
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status is SessionStatus.STOPPED)
        await pilot.press("ctrl+down")  # the UI answers while the abort hangs
        await wait_for(pilot, lambda: app.selected == "s2")
        await d.clock.advance(4.9)  # the grace runs on the engine's clock, so no load can hurry it
        assert not wedged[0].killed and engine_of(app).manager.view("s1").status is SessionStatus.STOPPED
        await d.clock.advance(0.1)
        await d.settle()
        assert wedged[0].killed  # at the grace's end, not some real seconds later
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status is SessionStatus.DISCONNECTED)
        app.select("s1")
        await d.send("s1", "still there?")
        assert engine_of(app).manager.view("s1").status.busy and wedged[-1] is not wedged[0]
        assert wedged[-1].sent == ["still there?"]


async def test_ctrl_y_resends_an_interrupted_prompt(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        d = Driver(pilot)
        await d.settle()
        sid = await scenarios.interrupted_session(d)
        app.select(sid)
        await d.settle()
        assert app.pane.notice.display
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: engine_of(app).manager.view(sid).status.busy, what="the resent turn")
        await d.settle()
        assert not app.pane.notice.display


async def test_permission_banner_reconnect_button(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    actions: list[str] = []
    engine_of(app).manager.subscribe(lambda change: actions.append(change.action.value), ActionTaken)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        sid = await scenarios.denied_session(d)
        app.select(sid)
        await d.settle()
        assert app.pane.banner.display and actions.count("reconnect") == 1  # the automatic recovery
        await pilot.click("#banner-reconnect")
        await wait_for(pilot, lambda: actions.count("reconnect") == 2, what="the user's reconnect")


async def test_builtin_textual_theme_parses_the_app_css(tmp_path: Path) -> None:
    app = build_app(tmp_path, theme="textual-light")
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await Driver(pilot).settle()
        assert app.theme == "textual-light" and not notifications(app)
        assert app.get_css_variables()["permission-warning"]


async def test_click_a_row_selects_it_and_close_session_removes_it(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        sid = await d.add("second")
        await d.settle()
        rows = app.sidebar.session_list
        await pilot.click(rows, offset=rows.row_offset(sid))
        await wait_for(pilot, lambda: app.selected == sid and app.pane.session_id == sid)
        assert app.pane.editor.has_focus  # a click on a row hands the keyboard back to the prompt
        app.dashboard.action_close_session()
        await pilot.pause()
        assert sid in engine_of(app).manager.ids()  # nothing happens before the user confirms
        await pilot.press("y")
        await wait_for(pilot, lambda: sid not in engine_of(app).manager.ids())
        await d.settle()
        assert app.selected == "s1" and app.sidebar.session_list.session_ids == ["s1"]
        assert app.pane.log_for(sid) is None


async def test_broken_agents_file_falls_back_to_demo_with_one_notice(tmp_path: Path) -> None:
    from polypilot_tui.config import Settings
    from polypilot_tui.ui.launch import build_catalog

    agents = tmp_path / "agents.toml"
    agents.write_text("[broken\n", encoding="utf-8")
    catalog, notes = build_catalog(Settings.read(None, state_dir=tmp_path, agents_file=agents))
    assert catalog.names() == ["demo"] and len(notes) == 1 and "not valid TOML" in notes[0]
    app = build_app(tmp_path, notes=notes)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await Driver(pilot).settle()
        assert sum("not valid TOML" in n for n in notifications(app)) == 1
        assert engine_of(app).manager.ids() == ["s1"]
