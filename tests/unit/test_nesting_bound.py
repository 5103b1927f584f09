"""The nesting bound of untrusted JSON and TOML (domain/safe_json.py) against a plain reference.

The bound is checked before parsing, by the regex engine; brackets inside strings (and TOML
comments) do not count. Random texts of brackets, quotes, escapes and filler are checked
against a character-by-character reading of the same rules.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polypilot_tui.domain.safe_json import ParseError, load_json, load_toml

DEPTH = 4


def json_depth(text: str) -> int:
    """Deepest bracket nesting outside JSON strings (an unclosed string runs to the end)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(0, depth - 1)
    return deepest


def refused_as_deep(text: str) -> bool:
    try:
        load_json(text, "t.json", max_depth=DEPTH)
    except ParseError as exc:
        return "nested deeper" in exc.reason
    return False


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet='[]{}"\\a ,:\n', max_size=60))
def test_json_nesting_is_refused_exactly_when_it_is_too_deep(text: str) -> None:
    assert refused_as_deep(text) == (json_depth(text) > DEPTH)


def test_json_brackets_in_strings_do_not_count_and_the_line_is_named() -> None:
    assert load_json('{"a": "[[[[[[[[[[", "b": [1]}', "t.json", max_depth=DEPTH) == {"a": "[[[[[[[[[[", "b": [1]}
    with pytest.raises(ParseError) as caught:
        load_json('{"a": "[[[[[[",\n "b": [[[[[1]]]]]}', "t.json", max_depth=DEPTH)
    assert caught.value.line == 2 and "nested deeper than 4" in caught.value.reason


def test_valid_json_one_level_too_deep_is_refused_with_its_line() -> None:
    """Valid JSON that Python parses (its nesting measured on the value, then the line found)."""
    fits = "[" * 64 + '{"a": 1}' + "]" * 63 + "]"
    assert load_json(fits[:-1] + "\n" + fits[-1:], "t.json", max_depth=65) is not None
    too_deep = '{"x": [1, 2],\n "y":\n' + "[" * 64 + "1" + "]" * 64 + "}"
    with pytest.raises(ParseError) as caught:
        load_json(too_deep, "t.json")
    assert caught.value.line == 3 and "nested deeper than 64" in caught.value.reason
    assert load_json(too_deep, "t.json", max_depth=65)["y"][0][0] is not None


def test_toml_brackets_in_strings_and_comments_do_not_count() -> None:
    text = 'a = "[[[[[["\nb = \'{{{{{{\'\n# [[[[[[[[\nc = """\n[[[[[[\n"""\nd = [[1]]\n'
    assert load_toml(text, "t.toml", max_depth=DEPTH)["d"] == [[1]]
    with pytest.raises(ParseError) as caught:
        load_toml(text + "e = [[[[[1]]]]]\n", "t.toml", max_depth=DEPTH)
    assert caught.value.line == 8
