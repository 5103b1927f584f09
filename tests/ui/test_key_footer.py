"""The footer draws its keys in one widget (ui/widgets/key_footer.py): however many keys, it
mounts two widgets (the keys, the palette key); moving between two idle sessions redraws
nothing; a key that becomes usable (Esc once a session is marked) is drawn. Each key still
works as Textual's own footer key did: under the mouse it is highlighted and says its tooltip,
a click presses it, a click on a key that does not apply now rings the bell; and each key is
drawn cell for cell as Textual's footer draws it, in a dark and a light theme."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from rich.style import Style as RichStyle
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.widgets.key_footer import FooterEntry, FooterKeys, KeyFooter
from tests.ui.helpers import demo_app, screen_lines, session_added, wait_for


def entries(app: App[Any]) -> tuple[FooterEntry, ...]:
    return app.screen.query_one(KeyFooter).keys.entries


def clear_marks_usable(app: PolypilotApp) -> bool:
    return any(entry.action == "clear_marks" and entry.enabled for entry in entries(app))


async def test_the_keys_are_one_widget_redrawn_only_when_they_change(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1", what="the first session")
        await session_added(pilot, "demo", name="two")
        await wait_for(pilot, lambda: len(app.sidebar.session_list.session_ids) == 2, what="two sessions")
        footer = app.screen.query_one(KeyFooter)
        await wait_for(pilot, lambda: bool(entries(app)), what="the footer's keys")
        assert len(entries(app)) >= 5
        widgets = list(footer.query("*"))
        assert [type(widget) for widget in widgets] == [FooterKeys, FooterKey]  # one for all the keys
        shown, line = entries(app), footer.keys.render_line(0)
        assert not clear_marks_usable(app)
        for key, now in (("ctrl+down", "s2"), ("ctrl+up", "s1")):  # both idle: the same keys apply
            await pilot.press(key)
            await wait_for(pilot, lambda now=now: app.pane.editor.session_id == now, what=f"{now} on screen")
            await pilot.pause()
            assert list(footer.query("*")) == widgets and entries(app) == shown
            assert footer.keys.render_line(0) is line  # not even drawn again
        await pilot.press("ctrl+t")  # marked: Esc now clears the marks
        await wait_for(pilot, lambda: clear_marks_usable(app), what="Esc usable in the footer")
        await wait_for(pilot, lambda: "esc Clear marks" in screen_lines(app)[-1], what="Esc drawn in the footer")
        assert list(footer.query("*")) == widgets  # redrawn, not recomposed


class Keys(App[None]):
    """A bare app with three keys in its footer: one with a tooltip, one that does not apply."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "one", "One", tooltip="The first key"),
        Binding("f2", "two", "Two"),
        Binding("f3", "three", "Three"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.ran: list[str] = []
        self.bells = 0

    def compose(self) -> ComposeResult:
        yield KeyFooter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return None if action == "two" else True  # None: shown, dimmed

    def action_one(self) -> None:
        self.ran.append("one")

    def action_three(self) -> None:
        self.ran.append("three")

    def bell(self) -> None:
        self.bells += 1


def column_of(app: Keys, words: str) -> int:
    """Where the footer line shows ``words`` (what the user points at)."""
    return screen_lines(app)[-1].index(words)


async def test_a_key_is_highlighted_under_the_mouse_says_its_tooltip_and_a_click_presses_it() -> None:
    app = Keys()
    async with app.run_test(size=(80, 5), tooltips=True) as pilot:
        await wait_for(pilot, lambda: len(entries(app)) == 3, what="the three keys")
        keys = app.screen.query_one(KeyFooter).keys
        assert [(e.display, e.description, e.enabled) for e in entries(app)] == [
            ("f1", "One", True),
            ("f2", "Two", False),
            ("f3", "Three", True),
        ]

        def background(column: int) -> object:
            strip = app.screen._compositor.render_strips()[-1]  # noqa: SLF001 - the colours drawn
            segment = strip.crop(column, column + 1)._segments[0]  # noqa: SLF001
            return segment.style.bgcolor if segment.style else None

        plain = background(column_of(app, "One"))
        await pilot.hover(FooterKeys, offset=(column_of(app, "One"), 0))
        await wait_for(pilot, lambda: background(column_of(app, "One")) != plain, what="f1 highlighted")
        assert background(column_of(app, "Three")) == plain  # only the key under the mouse
        await wait_for(pilot, lambda: keys.tooltip == "The first key", what="its tooltip")
        await pilot.hover(FooterKeys, offset=(column_of(app, "Three"), 0))
        await wait_for(pilot, lambda: background(column_of(app, "One")) == plain, what="f1 plain again")
        assert keys.tooltip is None  # f3 has none

        await pilot.click(FooterKeys, offset=(column_of(app, "Three"), 0))
        await wait_for(pilot, lambda: app.ran == ["three"], what="f3 pressed by a click")
        await pilot.click(FooterKeys, offset=(column_of(app, "Two"), 0))
        await wait_for(pilot, lambda: app.bells == 1, what="the bell for a key that does not apply")
        await pilot.click(FooterKeys, offset=(column_of(app, " f1 "), 0))  # on the key itself
        await wait_for(pilot, lambda: app.ran == ["three", "one"], what="f1 pressed by a click")
        assert app.bells == 1


class Either(Keys):
    """The bare app's keys under Textual's own footer or ours."""

    def __init__(self, footer: type[Footer]) -> None:
        super().__init__()
        self.footer = footer

    def compose(self) -> ComposeResult:
        yield self.footer()


def footer_cells(app: App[Any]) -> list[tuple[str, object, object, bool, bool]]:
    """The footer line as drawn, cell by cell: its character, colours, bold and dim."""
    strip = app.screen._compositor.render_strips()[-1]  # noqa: SLF001 - the cells drawn
    cells = []
    for segment in strip:  # the footer's characters are one cell each
        style = segment.style or RichStyle()
        cells += [(char, style.color, style.bgcolor, bool(style.bold), bool(style.dim)) for char in segment.text]
    return cells


async def drawn(footer: type[Footer], theme: str, hover: str | None) -> list[tuple[str, object, object, bool, bool]]:
    app = Either(footer)
    async with app.run_test(size=(80, 3)) as pilot:
        await wait_for(pilot, lambda: "Three" in screen_lines(app)[-1], what="the keys drawn")
        app.theme = theme  # once drawn: a new theme redraws them in its colours
        if hover is not None:
            await pilot.hover(Footer, offset=(column_of(app, hover), 0))
        await pilot.pause()
        return footer_cells(app)


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light", "nord"])
async def test_the_keys_are_drawn_cell_for_cell_as_textuals_footer_draws_them(theme: str) -> None:
    """Each key in the colours, weight and spacing of Textual's FooterKey: a plain key, one that
    does not apply now (dimmed), one under the mouse, in a dark and a light theme."""
    plain, hovered = await drawn(KeyFooter, theme, None), await drawn(KeyFooter, theme, "Three")
    assert "f2 Two" in "".join(cell[0] for cell in plain) and hovered != plain
    assert plain == await drawn(Footer, theme, None)
    assert hovered == await drawn(Footer, theme, "Three")
