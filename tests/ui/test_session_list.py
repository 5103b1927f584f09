"""The sidebar's SessionList: one widget for any number of sessions, keys, mouse, theme colours."""

from __future__ import annotations

from pathlib import Path

from rich.segment import Segment
from textual.color import Color

from polypilot_tui.domain.view import SessionStatus
from polypilot_tui.ui.formatting import STATUS_ICONS
from tests.snapshots.fakes import Driver, build_app
from tests.ui.helpers import engine_of, wait_for


def icon_segment(app, sid: str) -> Segment:
    """The segment that draws a row's status icon."""
    rows = app.sidebar.session_list
    strip, _ = rows.row_strips(rows.session_ids.index(sid), rows.scrollable_content_region.width)
    icon = STATUS_ICONS[engine_of(app).manager.view(sid).status]
    return next(segment for segment in strip if segment.text.startswith(icon))


async def test_the_sidebar_is_three_widgets_however_many_sessions(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        widgets = len(app.sidebar.query("*"))
        for i in range(199):
            engine_of(app).manager.add_session("demo", name=f"worker {i}")
        await d.settle()
        rows = app.sidebar.session_list
        assert len(rows.session_ids) == 200 and rows.virtual_size.height == 400
        assert len(app.sidebar.query("*")) == widgets == 2  # the title and the list
        assert rows.rendered("s200")[0].strip() == f"{STATUS_ICONS[SessionStatus.IDLE]} worker 198"


async def test_keys_in_the_list_select_and_keep_the_row_in_view(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        for i in range(39):
            engine_of(app).manager.add_session("demo", name=f"worker {i}")
        await d.settle()
        rows = app.sidebar.session_list
        rows.focus()
        await wait_for(pilot, lambda: rows.has_focus)
        steps = [
            ("end", "s40"),
            ("up", "s39"),
            ("home", "s1"),
            ("down", "s2"),
            ("pagedown", f"s{2 + rows.scrollable_content_region.height // 2}"),
            ("pageup", "s2"),
        ]
        for key, wanted in steps:
            await pilot.press(key)
            await wait_for(
                pilot,
                lambda wanted=wanted: (
                    app.selected == wanted == app.sidebar.highlighted and app.pane.session_id == wanted
                ),
                what=f"{key} -> {wanted}",
            )
            assert rows.row_offset(wanted) is not None, f"{wanted} scrolled out of view after {key}"
        await pilot.press("up", "up")  # at the top: stays
        await wait_for(pilot, lambda: app.selected == "s1")


async def test_click_and_hover_a_row(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36), tooltips=True) as pilot:
        d = Driver(pilot)
        await d.settle()
        sid = await d.add("second")
        await d.settle()
        rows = app.sidebar.session_list
        await pilot.hover(rows, offset=rows.row_offset(sid))
        await wait_for(pilot, lambda: rows.tooltip is not None and "second · demo" in str(rows.tooltip))
        await pilot.click(rows, offset=rows.row_offset("s1"))
        await wait_for(pilot, lambda: app.selected == "s1" == app.sidebar.highlighted)


async def test_rows_follow_the_theme(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        await d.send("s1", "go")
        d.turn_start("s1")
        await d.settle()

        def busy_colour() -> Color:
            return Color.parse(app.get_css_variables()["status-busy"])

        segment = icon_segment(app, "s1")
        assert Color.from_rich_color(segment.style.color) == busy_colour()
        app.theme = "polypilot-day"
        await d.settle()
        assert (
            Color.from_rich_color(icon_segment(app, "s1").style.color)
            == busy_colour()
            != Color.from_rich_color(segment.style.color)
        )


async def test_closing_the_highlighted_session_moves_the_highlight(tmp_path: Path) -> None:
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        for name in ("two", "three"):
            await d.add(name)
        app.select("s3")
        await d.settle()
        assert app.sidebar.highlighted == "s3"
        app.dashboard.action_close_session()
        await pilot.press("y")
        await wait_for(pilot, lambda: "s3" not in engine_of(app).manager.ids())
        await d.settle()
        assert app.sidebar.session_list.session_ids == ["s1", "s2"]
        assert app.selected == app.sidebar.highlighted == "s2"  # its neighbour takes its place


async def test_a_redraw_keeps_the_rows_of_unchanged_sessions_and_moves_their_ages(tmp_path: Path) -> None:
    """A redraw remade every row of every session (three times while an attach lists 200): a
    session whose view and marks did not change keeps its row, its age still moving with the
    clock; a session that changed gets a new one."""
    app = build_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        d = Driver(pilot)
        await d.settle()
        await d.add("two")
        await d.add("three")
        for sid in ("s1", "s2", "s3"):  # each active once: an idle row says its age from a minute
            await d.finished_turn(sid, "hello", "hi")
        await d.settle()
        rows = app.sidebar.session_list
        before = {sid: rows.entry(sid) for sid in ("s1", "s2", "s3")}
        app.select("s2")  # a redraw in which no session changed
        await d.settle()
        assert all(rows.entry(sid) is before[sid] for sid in ("s1", "s3"))
        await d.advance(150)  # the heartbeat's redraw: every idle row says its age now
        assert all(rows.rendered(sid)[1].strip().endswith("2m ago") for sid in ("s1", "s2", "s3"))
        aged = {sid: rows.entry(sid) for sid in ("s1", "s2", "s3")}
        engine_of(app).manager.rename("s3", "renamed")
        await d.settle()
        assert rows.entry("s1") is aged["s1"] and rows.entry("s2") is aged["s2"]
        assert "renamed" in rows.rendered("s3")[0]
