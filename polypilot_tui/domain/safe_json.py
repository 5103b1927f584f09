"""Bounded JSON and TOML reading, and the strict JSON the app writes. Pure: no I/O.

Every file the app reads and does not control (the registry, traces, the agents file,
themes, agent logs) goes through :func:`load_json` or :func:`load_toml`:

- nesting deeper than ``max_depth`` is refused with the line it happens on (Python's
  parsers would raise RecursionError, and anything that walks the result would too);
- numbers JSON cannot carry faithfully (``NaN``, ``Infinity``, a float that overflows, an
  integer longer than :data:`MAX_INT_DIGITS` digits) read as ``null``: the caller's field
  check then rejects or drops that one value instead of a whole file failing (or a NaN
  travelling on into a comparison);
- every error is a :class:`ParseError` that names the source and the line.

:func:`dump_json` is the writer's half: strict JSON (no NaN or Infinity, no lone
surrogates), whatever the data holds.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from typing import Any

from polypilot_tui.domain.patterns import CompiledLater, compile_later

MAX_DEPTH = 64
"""Deepest nesting accepted; real files of ours stay under 10."""
MAX_INT_DIGITS = 40
"""Longer integers read as null (int() of thousands of digits is slow and nothing needs them)."""

# What brackets inside do not count in: a JSON string; TOML strings (multi-line first) and comments.
_JSON_SKIP = r'"[^"\\]*(?:\\.[^"\\]*)*"?'  # the loop unrolled: twice as fast in `re`
_TOML_SKIP = (
    r'"""(?:[^\\]|\\.)*?(?:"""|$)|\'\'\'.*?(?:\'\'\'|$)|"(?:[^"\\\n]|\\.)*"?|\'[^\'\n]*\'?'
    r"|#[^\n]*"
)
# (what to skip, what to skip or one bracket) per format. Every pattern here is compiled on its
# first use: a start reads a few TOML files, most too shallow to scan (compiled at import: ~2 ms).
_JSON_TOKENS = (compile_later(_JSON_SKIP, re.DOTALL), compile_later(_JSON_SKIP + r"|[\[\]{}]", re.DOTALL))
_TOML_TOKENS = (compile_later(_TOML_SKIP, re.DOTALL), compile_later(_TOML_SKIP + r"|[\[\]{}]", re.DOTALL))
_NOT_BRACKETS = compile_later(r"[^\[\]{}]+")
_TOML_WHERE = compile_later(r"\s*\(at line (\d+), column \d+\)")


class ParseError(ValueError):
    """A file cannot be parsed; the message names the source and the line."""

    def __init__(self, source: str, line: int | None, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = f"{source}: line {line}" if line is not None else source
        super().__init__(f"{where}: {reason}")


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, max(0, position)) + 1


def _deepest(brackets: str) -> int:
    depth = deepest = 0
    for char in brackets:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(0, depth - 1)
    return deepest


def _too_deep(text: str, tokens: tuple[CompiledLater, CompiledLater], max_depth: int) -> int | None:
    """Position where nesting first exceeds ``max_depth`` (None when it never does)."""
    if text.count("[") + text.count("{") <= max_depth:
        return None  # cannot be deeper than the number of openers: no scan needed
    skip, tokens_or_brackets = tokens
    # The brackets alone, found by the regex engine: a look at each token from Python took
    # 14 ms of a 200-session start. Only a file that is too deep is scanned again for where.
    if _deepest(_NOT_BRACKETS().sub("", skip().sub("", text))) <= max_depth:
        return None
    depth = 0
    for match in tokens_or_brackets().finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > max_depth:
                return match.start()
        elif char in "]}":
            depth = max(0, depth - 1)
    return None


def _number_or_null(literal: str) -> float | None:
    value = float(literal)
    return value if math.isfinite(value) else None


def _int_or_null(literal: str) -> int | None:
    return None if len(literal.lstrip("-")) > MAX_INT_DIGITS else int(literal)


def load_json(text: str | bytes, source: str, *, max_depth: int = MAX_DEPTH, first_line: int = 1) -> Any:
    """Parse JSON text within the bounds above; raises :class:`ParseError`.

    ``first_line`` numbers the lines of a fragment (one line of a JSONL file).
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(source, None, f"not UTF-8 text (byte {exc.start})") from None
    offset = first_line - 1
    # Parsed first, the nesting measured on the value (a look at each container: ~0.6 ms of a
    # 216 KiB snapshot, where scanning the text for brackets outside strings took ~3 ms); the
    # text is scanned only when it is too deep or does not parse, to name the line, and so that
    # too deep is what a text both too deep and broken is refused as.
    try:
        value = json.loads(text, parse_constant=lambda name: None, parse_float=_number_or_null, parse_int=_int_or_null)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        _refuse_if_too_deep(text, source, max_depth, offset)
        if isinstance(exc, json.JSONDecodeError):
            raise ParseError(source, exc.lineno + offset, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        raise ParseError(source, None, f"not valid JSON ({type(exc).__name__})") from None
    if _nesting(value, max_depth) > max_depth:
        _refuse_if_too_deep(text, source, max_depth, offset)
        raise ParseError(source, None, f"nested deeper than {max_depth} levels")  # the scan agrees: never here
    return value


def _refuse_if_too_deep(text: str, source: str, max_depth: int, offset: int) -> None:
    deep = _too_deep(text, _JSON_TOKENS, max_depth)
    if deep is not None:
        raise ParseError(source, _line_of(text, deep) + offset, f"nested deeper than {max_depth} levels")


def _nesting(value: Any, limit: int) -> int:
    """How deep arrays and objects nest in a parsed JSON value, counted up to ``limit`` + 1
    (one level at a time: each value is looked at once, and no recursion)."""
    depth, level = 0, [value]
    while depth <= limit:
        containers = [item for item in level if type(item) is dict or type(item) is list]
        if not containers:
            return depth
        depth += 1
        level = [item for c in containers for item in (c.values() if type(c) is dict else c)]
    return depth


def load_toml(text: str, source: str, *, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """Parse TOML text within the bounds above; raises :class:`ParseError`."""
    deep = _too_deep(text, _TOML_TOKENS, max_depth)
    if deep is not None:
        raise ParseError(source, _line_of(text, deep), f"nested deeper than {max_depth} levels")
    try:
        return tomllib.loads(text, parse_float=_number_or_null)
    except tomllib.TOMLDecodeError as exc:
        where = _TOML_WHERE().search(str(exc))  # "(at line 3, column 5)": no attribute before 3.14
        reason = _TOML_WHERE().sub("", str(exc)).strip()
        raise ParseError(source, int(where.group(1)) if where else None, f"not valid TOML ({reason})") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of 5000 digits
        raise ParseError(source, None, f"not valid TOML ({type(exc).__name__}: {str(exc)[:80]})") from None


_TOML_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
_TOML_DOTTED = rf"{_TOML_KEY}(?:[ \t]*\.[ \t]*{_TOML_KEY})*"
_TOML_HEADER = compile_later(rf"[ \t]*\[\[?[ \t]*({_TOML_DOTTED})[ \t]*\]")
_TOML_ASSIGN = compile_later(rf"[ \t]*({_TOML_DOTTED})[ \t]*=")
_TOML_MULTILINE = compile_later(r'"""|\'\'\'')


def _dotted_path(dotted: str) -> tuple[str, ...]:
    """The keys of a dotted TOML key as written (quotes and escapes undone by tomllib itself)."""
    node: Any = tomllib.loads(f"{dotted} = 0")
    path: list[str] = []
    while isinstance(node, dict) and node:
        key = next(iter(node))
        path.append(key)
        node = node[key]
    return tuple(path)


def toml_key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line each table and key of a TOML text is first written on, by its full path
    (``[agent]`` then ``command = …`` gives ``("agent",)`` and ``("agent", "command")``).

    For messages about a file that parsed (tomllib keeps no positions): keys inside inline
    tables and lines inside multi-line strings are not listed (a lookup falls back to the
    nearest enclosing key)."""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    in_string: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if in_string is not None:
            if line.count(in_string) % 2 == 1:
                in_string = None
            continue
        header = _TOML_HEADER().match(line)
        assign = None if header else _TOML_ASSIGN().match(line)
        try:
            if header:
                table = _dotted_path(header.group(1))
                lines.setdefault(table, number)
            elif assign:
                lines.setdefault((*table, *_dotted_path(assign.group(1))), number)
        except tomllib.TOMLDecodeError:
            pass  # not a key after all (a line of an array, say)
        rest = line[assign.end() :] if assign else ""
        opened = _TOML_MULTILINE().findall(rest)
        if len(opened) % 2 == 1:
            in_string = opened[0]
    return lines


def line_of(lines: Mapping[tuple[str, ...], int], path: tuple[str, ...]) -> int | None:
    """The line of ``path`` in :func:`toml_key_lines`' answer, else of its nearest enclosing key."""
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def _finite(value: Any) -> Any:
    """A copy of JSON-like data with NaN and infinities replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dump_json(value: Any, *, indent: int | None = None, ascii_only: bool = False) -> str:
    """Strict JSON text: NaN and infinities become null, anything else unknown its ``str``.

    Lone surrogates (from ``\\ud800`` escapes in what an agent sent) are escaped, so the
    text always encodes to valid UTF-8 (and only they are). ``ascii_only`` escapes every
    non-ASCII character too (for a terminal: no C1 control character gets through raw).
    """
    try:
        text = json.dumps(value, ensure_ascii=ascii_only, allow_nan=False, indent=indent, default=str)
    except ValueError:
        text = json.dumps(_finite(value), ensure_ascii=ascii_only, allow_nan=False, indent=indent, default=str)
    return _escape_surrogates(text)


def _escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate written as its JSON escape (``\\ud800``).

    json.dumps leaves them raw in strings (the only place a non-ASCII character can be), and
    raw they are not UTF-8; escaped, the rest of the text keeps its size, whatever else the
    document holds (a size limit counts each string on its own)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("ascii" if text.isascii() else "utf-8")
    return text


def json_text_bytes(text: str) -> int:
    """The UTF-8 bytes of ``text`` as a JSON string written by :func:`dump_json` (quotes included)."""
    return len(_escape_surrogates(json.dumps(text, ensure_ascii=False)).encode("utf-8"))
