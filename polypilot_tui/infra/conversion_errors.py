"""msgspec's one error about a value it would not convert, read: where, what kind, and why.

msgspec says the first problem it meets as text: ``Expected `int`, got `str` - at `$.turns[0]```.
The settings (config.py) and the engine's codec (engine/codec.py) each say it in their own
words; both read it here. Reading the text is tied to msgspec's wording: the tests of both
callers hold each kind to a message of ours.
"""

from __future__ import annotations

from enum import Enum
from functools import cache
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.patterns import compile_later

_AT = " - at `$"
_STEP = compile_later(r"\.(\w+)|\[(\d+|\.\.\.)\]")
_QUOTED = compile_later(r"`([^`]*)`")
_FIELD = compile_later(r"Object (contains unknown|missing required) field `([^`]*)`")
_NOT_A_VALUE = "Invalid enum value "
_JSON_WORDS = {"object": "an object", "array": "a list"}
"""msgspec's names of JSON's types that read better in our words (the rest read as they are)."""

Step = str | int
"""A field's name, a list's index, or ``"..."`` for a table's value (msgspec names no key)."""


@dataclass(frozen=True)
class ConversionProblem:
    """Where the value was refused and why."""

    path: tuple[Step, ...]
    """From the converted value to the refused one (for a missing or unknown field: to its record)."""
    kind: Literal["missing", "unknown", "choice", "expected", "own"]
    """A required field missing, a field that is none, a value no enum or Literal has, a value of
    the wrong type or out of bounds, or what a record's own check (``__post_init__``) said."""
    said: str
    """In words: the refused value's repr (choice), ``expected int, got str`` (expected), the
    record's own words (own); the field's name otherwise."""
    hint: Any = Any
    """The type at ``path`` (for a choice: the enum or the Literal), bounds and None left out."""

    def where(self, start: str = "") -> str:
        """``start.a.b[0]``: the path as people read it."""
        return start + "".join(
            f"[{step}]" if isinstance(step, int) or step == "..." else f".{step}" for step in self.path
        )

    def choices(self) -> str:
        """``'a', 'b' or 'c'``: what a choice could have been ("" when the type is no enum or Literal)."""
        values = (
            [repr(member.value) for member in self.hint]
            if isinstance(self.hint, type) and issubclass(self.hint, Enum)
            else [repr(value) for value in get_args(self.hint)]
            if get_origin(self.hint) is Literal
            else []
        )
        return ", ".join(values[:-1]) + f" or {values[-1]}" if len(values) > 1 else "".join(values)


def read_problem(form: Any, message: str) -> ConversionProblem:
    """msgspec's ``message`` about converting a value to ``form``, read."""
    said, at, path_text = message.rpartition(_AT)
    if not at:
        said, path_text = message, "`"
    path = tuple(_step(name, index) for name, index in _STEP().findall(path_text.removesuffix("`")))
    if field := _FIELD().fullmatch(said):
        kind: Literal["missing", "unknown"] = "missing" if field.group(1) == "missing required" else "unknown"
        return ConversionProblem(path, kind, field.group(2))
    if said.startswith(_NOT_A_VALUE):  # msgspec writes the value as a repr
        return ConversionProblem(path, "choice", said.removeprefix(_NOT_A_VALUE), type_at(form, path))
    if said.startswith("Expected `"):  # "Expected `int | null`, got `str`", "Expected `float` >= 0.5"
        return ConversionProblem(path, "expected", "e" + _QUOTED().sub(lambda m: _words(m.group(1)), said)[1:])
    return ConversionProblem(path, "own", said)


def _step(name: str, index: str) -> Step:
    return name or (int(index) if index.isdigit() else index)


def _words(types_: str) -> str:
    return " or ".join(_JSON_WORDS.get(name, name) for name in types_.split(" | "))


def type_at(form: Any, path: tuple[Step, ...]) -> Any:
    """The type at ``path`` inside ``form`` (records' fields, lists' items, tables' values),
    bounds and None left out; Any where it cannot be told."""
    hint = plain(form)
    for step in path:
        args = get_args(hint)
        if step == "...":
            hint = args[1] if len(args) == 2 else Any
        elif isinstance(step, int):  # a list's or a tuple's item
            if len(args) == 1 or (len(args) == 2 and args[1] is Ellipsis):
                hint = args[0]
            else:
                hint = args[step] if step < len(args) else Any
        elif isinstance(hint, type) and (hasattr(hint, "__dataclass_fields__") or hasattr(hint, "__struct_fields__")):
            hint = _hints(hint).get(step, Any)
        else:
            return Any
        hint = plain(hint)
    return hint


@cache
def _hints(cls: type) -> dict[str, Any]:
    """A record's fields' types, bounds kept (read once: the settings ask per given name)."""
    return get_type_hints(cls, include_extras=True)


def plain(hint: Any) -> Any:
    """``hint`` without its bounds (Annotated) and without None."""
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    if get_origin(hint) in (Union, UnionType):
        options = [option for option in get_args(hint) if option is not type(None)]
        return plain(options[0]) if len(options) == 1 else hint
    return hint
