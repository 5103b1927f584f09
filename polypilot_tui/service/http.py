"""httpx and httpx-sse, imported without httpx's command line (issue 25: the dashboard's start).

``httpx/__init__.py`` imports its command-line module (``httpx._main``) whenever click, Rich
and Pygments are importable — and click always is here (uvicorn needs it). That module imports
click, Rich's progress, syntax and table, and Pygments' lexers: ~20-40 ms of CPU on every
dashboard start, for the ``httpx`` console script we never run in-process (upstream:
encode/httpx#3547, open). There is no option to skip it, so while httpx is first imported a
stand-in is registered as ``httpx._main``: its ``main`` imports the real module and runs it when
called, so ``httpx.main`` still works; the stand-in is removed from ``sys.modules`` right after,
and a later ``import httpx._main`` loads the real module. Nothing else of httpx is touched.
tests/unit/test_http_import.py holds both: no click after the import, the real CLI after it.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

CLI_MODULE = "httpx._main"


def _stand_in() -> ModuleType:
    """A ``httpx._main`` whose ``main`` loads the real one when first called."""
    module = ModuleType(
        CLI_MODULE, "Stand-in for httpx's command line, loaded when called (polypilot_tui.service.http)."
    )

    def main(*args: Any, **kwargs: Any) -> Any:
        from httpx._main import main as real

        return real(*args, **kwargs)

    module.main = main  # type: ignore[attr-defined]
    return module


def _import_without_cli() -> None:
    """Import httpx with the stand-in as its command line, unless it is imported already."""
    if "httpx" in sys.modules:
        return
    stand_in = _stand_in()
    sys.modules.setdefault(CLI_MODULE, stand_in)
    try:
        import httpx  # noqa: F401
    finally:
        if sys.modules.get(CLI_MODULE) is stand_in:
            del sys.modules[CLI_MODULE]


_import_without_cli()

import httpx  # noqa: E402 - after the stand-in above
from httpx_sse import ServerSentEvent, aconnect_sse  # noqa: E402

__all__ = ["ServerSentEvent", "aconnect_sse", "httpx"]
