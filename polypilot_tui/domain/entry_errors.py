"""What is wrong with one entry (a table) of a file the user wrote, said with its line: an
unknown key with the key it may be a typo of, a bad value with the reason."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from polypilot_tui.domain.names import close_names, either
from polypilot_tui.domain.safe_json import line_of

UNKNOWN_KEY = "unknown_key"
"""The type of error a key that is not a field is (config.py's InvalidSettings)."""


def unknown_key(key: str, keys: Sequence[str]) -> str:
    """``unknown key 'comand' (did you mean 'command'?)``, or the keys there are."""
    close = close_names(key, keys, 2)
    hint = f"did you mean {either(close)}?" if close else f"keys: {', '.join(keys)}"
    return f"unknown key {key!r} ({hint})"


def entry_problem(
    errors: Sequence[Mapping[str, Any]],
    keys: Mapping[str, Sequence[str]],
    lines: Mapping[tuple[str, ...], int],
    name: str,
) -> tuple[tuple[str, ...], str]:
    """Where the first error is (its key path in the entry) and every error in words, each after
    the first with its own line when it is on another. ``errors``: each one's ``loc`` (the key
    path), ``type`` and ``msg`` (config.py's InvalidSettings.errors); ``keys``: the keys of the entry ("")
    and of its nested tables (by key); ``lines``: where the file's keys are (toml_key_lines)."""
    said: list[str] = []
    paths = [tuple(str(part) for part in error.get("loc", ())) for error in errors]
    first_line = line_of(lines, (name, *paths[0])) if paths else None
    for loc, error in zip(paths, errors, strict=True):
        if error.get("type") == UNKNOWN_KEY and loc:
            inside = f"{'.'.join(loc[:-1])}: " if len(loc) > 1 else ""
            text = inside + unknown_key(loc[-1], keys.get(loc[0] if len(loc) > 1 else "", ()))
        else:
            text = f"{'.'.join(loc) or 'entry'}: {str(error.get('msg', 'invalid')).removeprefix('Value error, ')}"
        line = line_of(lines, (name, *loc))
        said.append(f"line {line}: {text}" if said and line not in (None, first_line) else text)
    return (paths[0] if paths else ()), "; ".join(said)
