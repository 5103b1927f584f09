"""Import the Copilot SDK without building its ~1,960 dataclasses up front.

``copilot`` imports its generated protocol modules (``copilot.generated.rpc``: 3.8 MB of
source, ``session_events``), and ``@dataclass`` on their ~1,870 classes is ~75% of the SDK's
~0.9 s import: each class has its ``__init__``, ``__repr__`` and ``__eq__`` written as source
and compiled (the root class ``RPC`` alone, 1,865 fields and no docstring: ~0.25 s); its
client, session and host modules add ~90 more (~0.05 s). A run uses a few dozen of them.
:func:`import_sdk` imports the SDK with every module's ``@dataclass`` made on first use, as
ours are (:mod:`polypilot_tui.domain.dataclass_on_use`: the same function, the same options,
when an instance is first made, printed or compared, or the class's fields first read).
Nothing else changes: the modules' code, names and classes are the SDK's own.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from polypilot_tui.domain.dataclass_on_use import dataclass

SDK_PACKAGE = "copilot"
"""The SDK's package: its modules' dataclasses are made when first used."""
_lock = threading.Lock()


class _DeferredDataclasses(ModuleType):
    """``dataclasses`` as the SDK's modules see it: the same, but ``dataclass`` deferred."""

    def __getattr__(self, name: str) -> Any:
        return dataclass if name == "dataclass" else getattr(dataclasses, name)


_SHIM = _DeferredDataclasses("dataclasses")


def _import_for_sdk(
    name: str,
    globals: dict[str, Any] | None = None,  # noqa: A002 - builtins.__import__'s own names
    locals: dict[str, Any] | None = None,  # noqa: A002
    fromlist: Sequence[str] = (),
    level: int = 0,
) -> Any:
    if name == "dataclasses" and level == 0 and fromlist:
        return _SHIM
    return builtins.__import__(name, globals, locals, fromlist, level)


class _DeferringLoader(importlib.abc.Loader):
    """Runs an SDK module with its own builtins, whose ``__import__`` hands it the shim."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self.loader.create_module(spec)
        return created

    def __getattr__(self, name: str) -> Any:  # get_source (tracebacks), is_package …: the wrapped loader's
        return getattr(self.loader, name)

    def exec_module(self, module: ModuleType) -> None:
        own = dict(vars(builtins))
        own["__import__"] = _import_for_sdk
        module.__dict__["__builtins__"] = own
        self.loader.exec_module(module)


class _DeferringFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != SDK_PACKAGE and not fullname.startswith(SDK_PACKAGE + "."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _DeferringLoader(spec.loader)
        return spec


_FINDER = _DeferringFinder()


def install() -> None:
    """Make every later import of the SDK's modules defer their dataclasses (once; the finder
    handles the SDK's names only and stays: taking it out of ``sys.meta_path`` while another
    thread walks that list would make the walk skip a finder)."""
    with _lock:
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)


def import_sdk() -> ModuleType:
    """``import copilot``, its dataclasses made as they are first used (unless it was
    imported before :func:`install`)."""
    install()
    return importlib.import_module("copilot")
