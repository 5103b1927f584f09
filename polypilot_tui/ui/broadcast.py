"""One prompt to several sessions (the engine's BROADCAST): the sessions marked in the sidebar
(ctrl+t), and how what each did with the prompt is told.

Marks are session ids, so they stay on their sessions however the list re-orders; a session
that leaves the list leaves the marks, the others stay. Each session takes the prompt or
refuses it on its own (a busy one queues it): a refusal is told with the session and the
reason, never lost — the text goes back to that session's draft, or to the box when no
session took it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from polypilot_tui.domain.fan_out import BroadcastResult
from polypilot_tui.domain.text import one_line

SHOWN_REFUSALS = 8
"""Refusals one toast names (the rest are counted)."""


class Marks:
    """The sessions marked for a broadcast."""

    def __init__(self) -> None:
        self._ids: set[str] = set()

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> frozenset[str]:
        """The marked sessions' ids."""
        return frozenset(self._ids)

    def toggle(self, session_id: str) -> bool:
        """Mark a session, or unmark it when it was; whether it is marked now."""
        if session_id in self._ids:
            self._ids.discard(session_id)
            return False
        self._ids.add(session_id)
        return True

    def clear(self) -> int:
        """Unmark every session; how many were marked."""
        count = len(self._ids)
        self._ids.clear()
        return count

    def keep_only(self, live: Collection[str]) -> bool:
        """Forget the sessions that left the list; whether any did."""
        gone = self._ids - set(live)
        self._ids -= gone
        return bool(gone)

    def in_order(self, ids: Iterable[str]) -> list[str]:
        """The marked sessions, in the order of ``ids`` (the sidebar's)."""
        return [sid for sid in ids if sid in self._ids]


def refusals_text(refused: Sequence[BroadcastResult], name: dict[str, str]) -> str:
    """The refusals, one line each: the session and why (the first :data:`SHOWN_REFUSALS`)."""
    lines = [
        f"{one_line(name.get(d.session_id, d.session_id), 40)}: {one_line(d.reason, 120)}"
        for d in refused[:SHOWN_REFUSALS]
    ]
    if len(refused) > SHOWN_REFUSALS:
        lines.append(f"… and {len(refused) - SHOWN_REFUSALS} more")
    return "\n".join(lines)
