"""What the engine takes in: a prompt, a queued prompt, a session's name, a new session —
refused at the edge, with a message that names the limit (domain/limits.py), when keeping it
would break a limit. A user's text is never cut: it is taken whole or refused whole."""

from __future__ import annotations

from collections.abc import Iterable

from polypilot_tui.domain.limits import (
    HELD_BYTES,
    ID_CHARS,
    NAME_CHARS,
    PATH_CHARS,
    QUEUE_BYTES,
    QUEUE_PROMPTS,
    REF_CHARS,
    SESSIONS,
    LimitExceeded,
    check_prompt,
    size_words,
    sizes_words,
)
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.workspace import Workspace


def admit_prompt(prompt: str, session: Session, queued: bool, sessions: Iterable[Session]) -> int:
    """The prompt's size as saved, when ``session`` may take it (``queued``: behind its turn)
    and the engine of ``sessions`` may hold it; :class:`LimitExceeded` otherwise."""
    size = check_prompt(prompt)
    if queued:
        if len(session.queue) >= QUEUE_PROMPTS:
            raise LimitExceeded(
                f"{QUEUE_PROMPTS} prompts are queued in this session already, the most one may hold; "
                "wait for the turn, or drop some"
            )
        waiting = sum(p.size for p in session.queue)
        if waiting + size > QUEUE_BYTES:
            holds, most = sizes_words(waiting, QUEUE_BYTES)
            raise LimitExceeded(
                f"the prompt is {size_words(size)} and this session's queue holds {holds} already; "
                f"a queue may hold at most {most}"
            )
    held = sum(s.held_prompt_bytes() for s in sessions)
    if held + size > HELD_BYTES:
        holds, most = sizes_words(held, HELD_BYTES)
        raise LimitExceeded(
            f"the prompt is {size_words(size)} and the engine holds {holds} of prompts already (queued, "
            f"running or interrupted, over all sessions); it may hold at most {most}: send or drop queued prompts first"
        )
    return size


def admit_session(count: int, workspace: Workspace | None = None) -> None:
    """One more session beside ``count`` (working in ``workspace``); :class:`LimitExceeded`
    when the engine holds its most, or the workspace names what it cannot keep."""
    if count >= SESSIONS:
        raise LimitExceeded(f"the engine holds {SESSIONS} sessions, the most it may; close some first")
    if workspace is not None:
        admit_workspace(workspace)


def admit_workspace(workspace: Workspace) -> None:
    """A folder, repository and branches the engine can keep; :class:`LimitExceeded` otherwise."""
    for what, value, limit in (
        ("folder", workspace.folder, PATH_CHARS),
        ("repository", workspace.repo, PATH_CHARS),
        ("branch", workspace.branch, REF_CHARS),
        ("base", workspace.base, REF_CHARS),
        ("base commit", workspace.base_commit, ID_CHARS),
    ):
        if len(value) > limit:
            raise LimitExceeded(f"the {what} has {len(value):,} characters; it may have at most {limit:,}")


def session_name(name: str) -> str:
    """``name`` on one line; :class:`LimitExceeded` when it is longer than a name may be
    (refused, never cut: it is the user's)."""
    flat = one_line(name, len(name) + 1)
    if not flat:
        raise ValueError("a session needs a name")
    if len(flat) > NAME_CHARS:
        raise LimitExceeded(f"the name has {len(flat)} characters; a session's name may have at most {NAME_CHARS}")
    return flat
