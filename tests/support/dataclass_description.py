"""Every dataclass of some modules described, in two fresh interpreters: the real ``@dataclass``
and ours made on first use (domain/dataclass_on_use.py) must describe each class alike.

A test gives a script that imports its modules one way or the other (``sys.argv[1]``: "real"
or "on_use") and ends with :func:`report`; :func:`described_both_ways` runs both side by side.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).parents[2]


def _shown(value: object) -> str:
    return "MISSING" if value is dataclasses.MISSING else repr(value)


def _sample(cls: Any) -> Any:
    args = {f.name: None for f in dataclasses.fields(cls) if f.init}
    try:
        return cls(**args)
    except Exception as exc:  # noqa: BLE001 - the refusal is part of the description
        return exc


def describe(cls: Any) -> dict[str, Any]:
    """Fields, defaults, ``__init__``, docstring, hashing, match arguments, params, slots (and
    their pickling), and an instance's repr and equality (reading the fields makes a class waiting for its use)."""
    made = _sample(cls)
    return {
        "fields": [
            [f.name, str(f.type), _shown(f.default), _shown(f.default_factory), f.init, f.repr, f.kw_only, f.compare]
            for f in dataclasses.fields(cls)
        ],
        "init": str(inspect.signature(cls.__init__)),
        "doc": cls.__doc__,
        "hash": cls.__hash__ is None,
        "match": list(getattr(cls, "__match_args__", ())),
        "params": repr(cls.__dataclass_params__),
        "slots": vars(cls).get("__slots__"),
        "state": [name for name in ("__getstate__", "__setstate__") if name in vars(cls)],  # pickle of slots
        "repr": repr(made),
        "eq": made == _sample(cls) if not isinstance(made, Exception) else None,
    }


def report(pending: int, modules: Iterable[ModuleType]) -> None:
    """Print, as JSON, ``pending`` and the description of every dataclass ``modules`` define."""
    classes = {
        f"{module.__name__}.{name}": describe(cls)
        for module in modules
        for name, cls in sorted(vars(module).items())
        if isinstance(cls, type) and cls.__module__ == module.__name__ and dataclasses.is_dataclass(cls)
    }
    print(json.dumps({"pending": pending, "classes": classes}))


def described_both_ways(script: str, timeout: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``script`` reports with the real decorator, and with ours (two cores: side by side)."""
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script, how], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for how in ("real", "on_use")
    ]
    results = []
    for proc in runs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(re.sub(r" at 0x[0-9a-f]+", "", out)))  # an address differs
    real, ours = results
    return real, ours
