"""Recovery guardrails: per-session attempt caps, an in-progress guard, a global breaker.

Recovery never widens permissions: it reconnects with the configured permission handler.
It resends the last prompt only if no tool succeeded this turn (#298): side effects must
not run twice.
"""

from __future__ import annotations

from collections import deque
from dataclasses import field

from polypilot_tui.domain.dataclass_on_use import dataclass


@dataclass
class RecoveryGate:
    """Decides whether a session may try to recover now, and remembers what it tried."""

    max_attempts: int = 2
    breaker_limit: int = 5
    breaker_window: float = 300.0
    _attempts: dict[str, int] = field(default_factory=dict)
    _in_progress: set[str] = field(default_factory=set)
    _recent: deque[float] = field(default_factory=deque)

    def attempts(self, session_id: str) -> int:
        return self._attempts.get(session_id, 0)

    def breaker_open(self, now: float) -> bool:
        """Too many recoveries across all sessions recently: stop trying everywhere."""
        while self._recent and now - self._recent[0] >= self.breaker_window:
            self._recent.popleft()
        return len(self._recent) >= self.breaker_limit

    def refusal(self, session_id: str, now: float) -> str | None:
        """Why a recovery may not start now, or None when it may."""
        if session_id in self._in_progress:
            return "a recovery is already in progress"
        if self.attempts(session_id) >= self.max_attempts:
            return f"{self.max_attempts} recovery attempts already failed"
        if self.breaker_open(now):
            return (
                f"circuit breaker open: {self.breaker_limit} recoveries across sessions in {int(self.breaker_window)} s"
            )
        return None

    def begin(self, session_id: str, now: float) -> int:
        """Mark a recovery as started; returns its attempt number (1-based)."""
        self._in_progress.add(session_id)
        self._attempts[session_id] = self.attempts(session_id) + 1
        self._recent.append(now)
        return self._attempts[session_id]

    def finish(self, session_id: str) -> None:
        """The recovery ended (either way); another may start later."""
        self._in_progress.discard(session_id)

    def in_progress(self, session_id: str) -> bool:
        return session_id in self._in_progress

    def reset(self, session_id: str) -> None:
        """A turn completed or the user aborted: the session starts with a clean slate."""
        self._attempts.pop(session_id, None)


def may_resend(successful_tools_this_turn: int) -> bool:
    """Resend the interrupted prompt only if no tool succeeded this turn (#298)."""
    return successful_tools_this_turn == 0
