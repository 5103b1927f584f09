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
    from polypilot_tui.agents.copilot.sdk_import import import_sdk
    from polypilot_tui.domain.dataclass_on_use import pending_count
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
