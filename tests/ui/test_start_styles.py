"""The dashboard's start styles once: each style sheet is parsed once (ui/stylesheet.py), at
the start, whose theme is set before anything mounts, and when a screen with style sheets of
its own opens; the main screen is not restyled whole when first shown (its widgets were styled
as they mounted), but is on a later resume that asks for it. Counted, not timed: the first frame's
time is the bench's (bench/process_start.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.css.tokenizer import Token
from textual.dom import DOMNode

from polypilot_tui.ui import stylesheet as app_stylesheet
from polypilot_tui.ui.screens.new_session import NewSessionScreen
from polypilot_tui.ui.stylesheet import AppStylesheet
from tests.ui.helpers import demo_app, wait_for

Source = tuple[object, str, bool, int]
"""What Textual parses a style sheet for: where it was read from, its scope, whether it is a
widget's default CSS, and its tie breaker (the same CSS read for another class is another)."""


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[Source]]:
    """How many times each style sheet was parsed (its rule sets made, from its tokens)."""
    counts: Counter[Source] = Counter()
    real = app_stylesheet.rule_sets

    def rule_sets(tokens: list[Token], variables: Any, scope: str, is_default_rules: bool, tie_breaker: int) -> Any:
        counts[(tokens[0].read_from, scope, is_default_rules, tie_breaker)] += 1
        return real(tokens, variables, scope, is_default_rules, tie_breaker)

    monkeypatch.setattr(app_stylesheet, "rule_sets", rule_sets)
    yield counts


def twice(counts: Counter[Source]) -> list[Source]:
    return [source for source, n in counts.items() if n > 1]


async def test_the_start_and_a_screen_opened_parse_each_style_sheet_once(
    tmp_path: Path, parsed: Counter[Source]
) -> None:
    app = demo_app(tmp_path)
    assert isinstance(app.stylesheet, AppStylesheet)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected is not None, what="the first session")
        app_sheets = [s for s in parsed if str(s[0][0]).endswith(".tcss")]  # type: ignore[index]
        assert len(app_sheets) == len(type(app).CSS_PATH)  # the app's own were parsed, with its theme's variables
        assert twice(parsed) == []
        assert app.theme != "textual-dark"  # a theme of ours: the change of theme at start happened

        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen), what="the dialog")
        assert any(str(s[0][0]).endswith("new_session.tcss") for s in parsed)  # type: ignore[index]
        assert twice(parsed) == []
        assert isinstance(app.stylesheet.copy(), AppStylesheet)  # what Textual's live CSS editing swaps in


async def test_the_main_screen_is_not_restyled_whole_when_first_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    restyled: list[DOMNode] = []
    real = DOMNode.update_node_styles

    def update_node_styles(node: DOMNode, animate: bool = True) -> None:
        restyled.append(node)
        real(node, animate)

    monkeypatch.setattr(DOMNode, "update_node_styles", update_node_styles)
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected is not None, what="the first session")
        assert app.dashboard not in restyled  # its widgets were styled as they mounted

        app.dashboard.post_message(events.ScreenResume())  # as Textual resumes a screen that asks for it
        await wait_for(pilot, lambda: app.dashboard in restyled, what="the restyle")
