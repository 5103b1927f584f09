"""SESSION on a command line: an id, or a name exactly one session has — one rule for every command."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


class NoSuchSession(LookupError):
    """SESSION names no session, or more than one."""


def pick_session(key: str, sessions: Iterable[T], id_of: Callable[[T], str], name_of: Callable[[T], str]) -> T:
    """The session whose id is ``key``, else the one session named ``key``; NoSuchSession
    (saying which) when none is, or when several share the name."""
    candidates = list(sessions)
    for session in candidates:
        if id_of(session) == key:
            return session
    named = [s for s in candidates if name_of(s) == key]
    if len(named) == 1:
        return named[0]
    if named:
        raise NoSuchSession(f"{len(named)} sessions are named {key!r}: use the id (`polypilot ls`)")
    raise NoSuchSession(f"no session {key!r} (see `polypilot ls`)")
