"""Frozen records to JSON and back, checked field by field (the engine service's wire form).

:func:`to_plain` turns a dataclass record (nested records, enums, tuples, agent events) into
JSON-ready values; :func:`from_plain` rebuilds a record of a given class from such values and
raises ValueError naming the field on anything else — what arrives from another process is
untrusted like any other input.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import fields
from enum import StrEnum
from functools import cache
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from polypilot_tui.domain.events import AgentEvent

T = TypeVar("T")


def to_plain(value: Any) -> Any:
    """``value`` as JSON-ready dicts, lists, strings and numbers."""
    if isinstance(value, AgentEvent):
        return value.to_json()
    if isinstance(value, StrEnum):
        return value.value
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: to_plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        return [to_plain(v) for v in value]
    return value


def from_plain(cls: type[T], obj: Any, where: str = "") -> T:
    """The ``cls`` record that :func:`to_plain` wrote as ``obj``; ValueError on any other shape."""
    where = where or cls.__name__
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected an object")
    values = {}
    hints = _hints(cls)  # type: ignore[arg-type]
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in obj:
            values[f.name] = _value(hints[f.name], obj[f.name], f"{where}.{f.name}")
    try:
        return cls(**values)
    except TypeError as exc:  # a required field is missing
        raise ValueError(f"{where}: {exc}") from None


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _value(hint: Any, value: Any, where: str) -> Any:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):  # X | None
        options = [h for h in get_args(hint) if h is not type(None)]
        return None if value is None else _value(options[0], value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list")
        args = get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise ValueError(f"{where}: expected {len(args)} values")
        return tuple(_value(h, v, f"{where}[{i}]") for i, (h, v) in enumerate(zip(args, value, strict=True)))
    if origin is Literal:
        if value not in get_args(hint):
            raise ValueError(f"{where}: {value!r} is not one of {get_args(hint)}")
        return value
    if hint is AgentEvent:
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected an event object")
        return AgentEvent.from_json(value)
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        try:
            return hint(value)
        except ValueError:
            raise ValueError(f"{where}: {value!r} is not a {hint.__name__}") from None
    if hasattr(hint, "__dataclass_fields__"):
        return from_plain(hint, value, where)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if type(value) is not hint:
        raise ValueError(f"{where}: expected {getattr(hint, '__name__', hint)}, got {type(value).__name__}")
    return value
