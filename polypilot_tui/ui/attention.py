"""Precise, low-noise attention: who finished unseen, who needs the user, when to ping.

Pure bookkeeping over pairs of :class:`SessionView` snapshots, so it is tested without a
terminal. Rules (from what users of peer tools ask for):

* a turn that ends while its session is not on screen marks the session *unread*;
* one ping when a session starts waiting for permission, one when a turn ends;
* never a ping for the session the user is looking at;
* never a second ping for the same state (same permission request, same turn).
"""

from __future__ import annotations

from typing import Literal

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.view import SessionStatus, SessionView

Severity = Literal["information", "warning", "error"]

_END_SEVERITY: dict[SessionStatus, Severity] = {
    SessionStatus.STUCK: "warning",
    SessionStatus.STOPPED: "information",
    SessionStatus.ERROR: "error",
    SessionStatus.DISCONNECTED: "error",
}
_END_WORDS: dict[SessionStatus, str] = {
    SessionStatus.STUCK: "got stuck",
    SessionStatus.STOPPED: "was stopped",
    SessionStatus.ERROR: "failed",
    SessionStatus.DISCONNECTED: "lost its agent",
}


@dataclass(frozen=True)
class Alert:
    """One ping: a bell and a toast (and a desktop notification while the terminal is not focused)."""

    session_id: str
    title: str
    message: str
    severity: Severity = "information"


class Attention:
    """Tracks unread sessions and which states were already announced."""

    def __init__(self) -> None:
        self.unread: set[str] = set()
        """Sessions whose turn finished while they were not on screen."""
        self._announced: dict[str, tuple[str, str]] = {}

    def observe(self, before: SessionView | None, after: SessionView, on_screen: bool) -> Alert | None:
        """Compare two snapshots of one session; return an alert when one is due."""
        if before is None and after.pending_permission is None:
            return None  # restored or brand-new sessions don't ping for the past
        # First seen already asking (it asked between two coalesced redraws): still a ping.
        finished = before is not None and after.turns > before.turns
        if on_screen:
            self.unread.discard(after.id)
            if after.pending_permission is not None:
                self._announced[after.id] = ("permission", after.pending_permission.request_id)
            return None
        if finished:
            self.unread.add(after.id)
        key: tuple[str, str] | None = None
        alert: Alert | None = None
        prompt = after.pending_permission
        if after.status is SessionStatus.AWAITING_PERMISSION and prompt is not None:
            key = ("permission", prompt.request_id)
            alert = Alert(after.id, f"{after.name} needs permission", one_line(prompt.title, 120), "warning")
        elif finished:
            key = ("turn", str(after.turns))
            words = _END_WORDS.get(after.status, "finished")
            reason = one_line(after.last_outcome_reason, 120) if after.status in _END_WORDS else ""
            alert = Alert(
                after.id,
                f"{after.name} {words}",
                reason or "Its turn is over.",
                _END_SEVERITY.get(after.status, "information"),
            )
        if key is None or self._announced.get(after.id) == key:
            return None
        self._announced[after.id] = key
        return alert

    def seen(self, session_id: str) -> None:
        """The user is looking at this session now."""
        self.unread.discard(session_id)

    def forget(self, session_id: str) -> None:
        """The session was closed."""
        self.unread.discard(session_id)
        self._announced.pop(session_id, None)

    def wants_user(self, view: SessionView) -> bool:
        """The session needs the user (permission, broken) or has unseen finished work."""
        return view.status.needs_user or view.id in self.unread
