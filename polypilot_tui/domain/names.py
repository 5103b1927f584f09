"""A name that is not there (a typo in a file, on a command line): the ones it may have meant."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_names(name: str, known: Iterable[str], count: int = 3) -> list[str]:
    """The known names ``name`` may stand for: those it begins (``my`` for ``my-agent``, any
    case), then those difflib finds close (``comand`` for ``command``); at most ``count``."""
    names = list(known)
    folded = name.casefold()
    close = [n for n in names if folded and n.casefold().startswith(folded) and n != name]
    close += [n for n in difflib.get_close_matches(name, names, n=count, cutoff=0.7) if n not in close and n != name]
    return close[:count]


def either(names: Iterable[str]) -> str:
    """``'a' or 'b'``."""
    return " or ".join(repr(n) for n in names)
