"""The Copilot SDK imported with its generated dataclasses made on first use (sdk_import.py).

Each side runs in a fresh interpreter (this one may have imported the SDK either way): one
imports the SDK as anyone would, the other through :func:`import_sdk` and then uses every
generated class once; the two must describe every class alike — fields, defaults, ``__init__``,
hashing, match arguments, repr and equality of an instance.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

DESCRIBE = r"""
import dataclasses, inspect, json, sys
if sys.argv[1] == "deferred":
    from polypilot_tui.agents.copilot.sdk_import import import_sdk, pending_count
    import_sdk()
    pending = pending_count()
else:
    import copilot
    pending = 0
from copilot.generated import rpc, session_events

def shown(value):
    return "MISSING" if value is dataclasses.MISSING else repr(value)

def sample(cls):
    args = {f.name: None for f in dataclasses.fields(cls) if f.init}
    try:
        return cls(**args)
    except Exception as exc:
        return exc

out = {"pending": pending, "classes": {}}
for module in (rpc, session_events):
    for name, cls in sorted(vars(module).items()):
        if not isinstance(cls, type) or cls.__module__ != module.__name__ or "__init__" not in vars(cls):
            continue
        if sys.argv[1] == "deferred":
            try:
                cls()  # the first use makes it (then asks for its arguments)
            except TypeError:
                pass
        if not dataclasses.is_dataclass(cls):
            continue
        made = sample(cls)
        fields = [
            [f.name, str(f.type), shown(f.default), shown(f.default_factory), f.init, f.repr, f.kw_only]
            for f in dataclasses.fields(cls)
        ]
        out["classes"][f"{module.__name__}.{name}"] = {
            "fields": fields,
            "init": str(inspect.signature(cls.__init__)),
            "hash": cls.__hash__ is None,
            "match": list(getattr(cls, "__match_args__", ())),
            "params": repr(cls.__dataclass_params__),
            "repr": repr(made),
            "eq": made == sample(cls) if not isinstance(made, Exception) else None,
        }
print(json.dumps(out))
"""


def describe(how: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", DESCRIBE, how], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.timeout(60)
def test_every_generated_class_is_made_as_the_sdk_makes_it_and_none_before_its_use() -> None:
    eager, deferred = describe("eager"), describe("deferred")  # side by side: two cores
    results = []
    for proc in (eager, deferred):
        out, err = proc.communicate(timeout=50)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(re.sub(r" at 0x[0-9a-f]+", "", out)))  # a sentinel's address differs
    sdk, ours = results
    assert ours["pending"] > 1500  # what makes the import fast: no class made at import
    assert len(sdk["classes"]) > 1500
    assert ours["classes"] == sdk["classes"]


def test_a_subclass_a_repr_and_an_equality_before_any_instance() -> None:
    from polypilot_tui.agents.copilot.sdk_import import deferred_dataclass, make_pending

    @deferred_dataclass(frozen=True)
    class Base:
        a: int
        b: str = "b"

    @deferred_dataclass(frozen=True)
    class Child(Base):
        c: int = 3

    class Plain(Base):  # not a dataclass: its own __init__ reaches the base's
        def __init__(self) -> None:
            super().__init__(1)

    assert "__dataclass_fields__" not in vars(Base)  # nothing made yet
    child = Child(1)
    assert (child.a, child.b, child.c) == (1, "b", 3) and hash(child) == hash(Child(1))
    assert repr(child).endswith("Child(a=1, b='b', c=3)") and child == Child(1) and child != Child(2)
    assert Plain().a == 1 and Base(5) == Base(5)

    @deferred_dataclass
    class Lonely:
        x: int = 0

    instance = object.__new__(Lonely)  # made without __init__ (copy, unpickling): repr and == still make it
    instance.x = 4
    assert repr(instance).endswith("Lonely(x=4)") and instance == Lonely(4)
    make_pending(Lonely)  # again: nothing left to make
