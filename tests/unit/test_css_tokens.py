"""The style sources' tokens kept from one start to the next (ui/css_tokens.py): read back, they
are Textual's own and make the same rules; a damaged, foreign, stale or linked file is as if
there were none, and is replaced when written."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from textual.app import App
from textual.css.stylesheet import Stylesheet
from textual.css.tokenize import tokenize
from textual.widgets import Footer, TextArea

import polypilot_tui.ui as ui_package
from polypilot_tui.ui.css_tokens import FILE_NAME, MAX_BYTES, KeptTokens
from polypilot_tui.ui.stylesheet import AppStylesheet
from polypilot_tui.ui.theming import APP_VARIABLES

UI = Path(ui_package.__file__).parent


def sources() -> list[tuple[str, tuple[str, str]]]:
    """Real style sources: the app's own files, and Textual's widgets' default CSS."""
    found = [(path.read_text(), (str(path), "")) for path in sorted(UI.rglob("*.tcss"))]
    for widget in (App, TextArea, Footer):
        found.append((widget.DEFAULT_CSS, (f"{widget.__module__}.py", f"{widget.__name__}.DEFAULT_CSS")))
    assert len(found) > 5
    return found


def variables() -> dict[str, str]:
    """The variables the dashboard's sources are parsed with (a default theme's, and the app's own)."""
    return {**App().get_css_variables(), **APP_VARIABLES}


def kept_in(folder: Path) -> KeptTokens:
    tokens = KeptTokens()
    tokens.keep_in(folder)
    return tokens


def written(tokens: KeptTokens) -> None:
    data = tokens.pending()
    assert data is not None
    tokens.write(data)


def rules_css(stylesheet: Stylesheet, css: str, read_from: tuple[str, str]) -> list[str]:
    stylesheet.add_source(css, read_from, is_default_css=read_from[1] != "")
    stylesheet.parse()
    return [rule.css for rule in stylesheet.rules]


def test_tokens_read_back_are_textuals_and_make_the_same_rules(tmp_path: Path) -> None:
    first = kept_in(tmp_path)
    for css, read_from in sources():
        assert first.tokens(css, read_from) == list(tokenize(css, read_from))
    assert first.tokenized == len(sources())
    written(first)
    assert (os.stat(tmp_path / FILE_NAME).st_mode & 0o777) == 0o600

    again = kept_in(tmp_path)
    for css, read_from in sources():
        assert again.tokens(css, read_from) == list(tokenize(css, read_from))
        # parsed from kept tokens with the app's variables: the rules of Textual's own parse
        ours = AppStylesheet(variables=variables(), tokens=again)
        assert rules_css(ours, css, read_from) == rules_css(Stylesheet(variables=variables()), css, read_from)
    assert again.tokenized == 0
    assert again.pending() is None  # nothing new: the file stays as it was


def test_a_changed_source_is_tokenized_again_and_both_are_kept(tmp_path: Path) -> None:
    first = kept_in(tmp_path)
    first.tokens("A { color: red; }", ("theme.tcss", ""))
    written(first)
    second = kept_in(tmp_path)
    assert second.tokens("A { color: blue; }", ("theme.tcss", "")) == list(
        tokenize("A { color: blue; }", ("theme.tcss", ""))
    )
    assert second.tokenized == 1
    written(second)
    third = kept_in(tmp_path)
    third.tokens("A { color: red; }", ("theme.tcss", ""))
    third.tokens("A { color: blue; }", ("theme.tcss", ""))
    assert third.tokenized == 0


@pytest.mark.parametrize(
    "content",
    [
        b"not json at all",
        b'{"stamp": "1:0:0", "tokens": {}}',  # another Textual's tokens
        b'{"stamp": 3, "tokens": []}',
        b'{"stamp": "x", "tokens": {"k": [["a", "b", "c", 1]]}, "more": 1}',
        b"\xff\xfe" * 100,
        b" " * (MAX_BYTES + 1),  # not read
    ],
    ids=["garbage", "stale", "wrong-types", "unknown-field", "binary", "too-large"],
)
def test_a_damaged_or_stale_file_is_as_if_there_were_none_and_is_replaced(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / FILE_NAME
    path.write_bytes(content)
    path.chmod(0o600)
    tokens = kept_in(tmp_path)
    css, read_from = sources()[0]
    assert tokens.tokens(css, read_from) == list(tokenize(css, read_from))
    assert tokens.tokenized == 1
    written(tokens)
    assert kept_in(tmp_path).tokens(css, read_from) and msgspec.json.decode(path.read_bytes())["tokens"]


def tampered(folder: Path, change: Callable[[list[list[Any]]], None]) -> tuple[str, tuple[str, str]]:
    """A source's tokens kept in ``folder``, then changed in the file by ``change``."""
    css, read_from = sources()[0]
    good = kept_in(folder)
    good.tokens(css, read_from)
    written(good)
    path = folder / FILE_NAME
    kept = msgspec.json.decode(path.read_bytes())
    (rows,) = kept["tokens"].values()
    change(rows)
    path.write_bytes(msgspec.json.encode(kept))
    return css, read_from


def a_number_made_nan(rows: list[list[Any]]) -> None:
    next(row for row in rows if row[0] == "number")[1] = "nan"  # no source says nan


def a_declaration_dropped(rows: list[list[Any]]) -> None:
    at = next(i for i, row in enumerate(rows) if row[0] == "declaration_name")
    del rows[at : at + 4]


def a_name_made_up(rows: list[list[Any]]) -> None:
    rows[0][0] = "no_such_token"


def a_name_swapped(rows: list[list[Any]]) -> None:
    next(row for row in rows if row[0] == "scalar")[0] = "declaration_end"  # spelt, but no rule parses


def names_that_raise(rows: list[list[Any]]) -> None:
    next(row for row in rows if row[0] == "declaration_set_end")[0] = "color"  # Textual's parse raises


@pytest.mark.parametrize(
    "change", [a_number_made_nan, a_declaration_dropped, a_name_made_up, a_name_swapped, names_that_raise]
)
def test_kept_tokens_that_are_not_the_sources_are_not_used(
    tmp_path: Path, change: Callable[[list[list[Any]]], None]
) -> None:
    """Tokens that do not spell their source (a value no source has, a piece left out), with a
    name Textual's tokenizer never gives, or that do not parse cleanly (damaged on disk, written
    by a bug, or planted: the number made NaN crashed the dashboard's first frame): the source
    is tokenized again, and parses as Textual parses it."""
    css, read_from = tampered(tmp_path, change)
    damaged = kept_in(tmp_path)
    ours = AppStylesheet(variables=variables(), tokens=damaged)
    assert rules_css(ours, css, read_from) == rules_css(Stylesheet(variables=variables()), css, read_from)
    assert damaged.tokenized == 1  # tokenized again, and kept right at the next write
    written(damaged)
    again = kept_in(tmp_path)
    assert again.tokens(css, read_from) == list(tokenize(css, read_from)) and again.tokenized == 0


def test_a_link_in_the_files_place_is_neither_read_nor_written_through(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    good = kept_in(tmp_path)
    css, read_from = sources()[0]
    good.tokens(css, read_from)
    written(good)
    (tmp_path / FILE_NAME).rename(elsewhere)
    data = elsewhere.read_bytes()
    (tmp_path / FILE_NAME).symlink_to(elsewhere)

    caplog.set_level(logging.WARNING, logger="polypilot_tui.ui.css_tokens")
    linked = kept_in(tmp_path)
    linked.tokens(css, read_from)
    assert linked.tokenized == 1  # the link's target was not read
    assert "is a link" in caplog.text
    written(linked)
    assert not (tmp_path / FILE_NAME).is_symlink()  # the link itself replaced, not its target
    assert elsewhere.read_bytes() == data
