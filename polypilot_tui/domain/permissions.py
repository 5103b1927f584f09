"""Permission-denial classification and the 3-of-5 sliding window (PolyPilot #285).

Only failed tool results are classified. A success counts as "not a denial" and slides the
window, so occasional successes between denials do not hide a broken permission binding.
"""

from __future__ import annotations

from collections import deque
from enum import StrEnum

WINDOW_SIZE = 5
TRIP_THRESHOLD = 3

_DENIAL_MARKERS = ("permission denied", "denied-no-approval-rule", "could not request permission")
_MCP_FAILURES = (
    "econnrefused",
    "spawn enoent",
    "connection refused",
    "server disconnected",
    "transport error",
    "failed to start",
    "server process exited",
)


class FailureKind(StrEnum):
    """How a failed tool result is classified."""

    PERMISSION = "permission"
    SHELL = "shell"
    MCP = "mcp"
    OTHER = "other"


def is_permission_denial(text: str) -> bool:
    """The tool failed because permission was refused or could not be asked for."""
    low = text.lower()
    return any(marker in low for marker in _DENIAL_MARKERS)


def is_shell_failure(text: str) -> bool:
    """The agent's shell environment is broken (``posix_spawn failed``)."""
    return "posix_spawn failed" in text.lower()


def is_mcp_error(text: str) -> bool:
    """An MCP server is down or unreachable."""
    low = text.lower()
    if "mcp server" in low or "mcp_server" in low:
        return True
    return "mcp" in low and any(marker in low for marker in _MCP_FAILURES)


def classify_failure(text: str) -> FailureKind:
    """Classify the text of a FAILED tool result."""
    if is_permission_denial(text):
        return FailureKind.PERMISSION
    if is_shell_failure(text):
        return FailureKind.SHELL
    if is_mcp_error(text):
        return FailureKind.MCP
    return FailureKind.OTHER


class DenialWindow:
    """The last five recoverable-or-successful tool results of a session."""

    def __init__(self, size: int = WINDOW_SIZE, threshold: int = TRIP_THRESHOLD) -> None:
        self._results: deque[bool] = deque(maxlen=size)
        self._threshold = threshold
        self.last_kind: FailureKind | None = None

    @property
    def count(self) -> int:
        """Recoverable failures in the window."""
        return sum(self._results)

    @property
    def tripped(self) -> bool:
        """At least 3 of the last 5 results were recoverable failures."""
        return self.count >= self._threshold

    def record(self, success: bool, failure_text: str = "") -> bool:
        """Record one tool result; returns True exactly when the count first reaches 3."""
        if success:
            self._results.append(False)
            return False
        kind = classify_failure(failure_text)
        if kind is FailureKind.OTHER:
            return False  # ordinary tool errors are not a binding problem
        before = self.count
        self._results.append(True)
        self.last_kind = kind
        return before < self._threshold <= self.count

    def clear(self) -> None:
        """Forget everything (on every send and every turn end)."""
        self._results.clear()
        self.last_kind = None
