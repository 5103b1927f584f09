"""Regular expressions compiled on their first use, not when their module is imported.

Compiling is most of what a module of patterns costs to import: the redactor's secret shapes
were ~11 ms of the dashboard's start and the failure classifier's words ~5 ms, though nothing
before the first frame redacts a text or names a failure (issue 25). A pattern made with
:func:`compile_later` is compiled the first time it is asked for, and only then.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

CompiledLater = Callable[[], re.Pattern[str]]
"""A pattern :func:`compile_later` makes: call it for the compiled pattern."""


def compile_later(pattern: str, flags: int = 0) -> CompiledLater:
    """``re.compile(pattern, flags)``, made on the first call; every later call returns it.

    Two threads that ask first at once may both compile it, to equal patterns."""

    @cache
    def compiled() -> re.Pattern[str]:
        return re.compile(pattern, flags)

    return compiled
