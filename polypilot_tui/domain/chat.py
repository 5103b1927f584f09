"""The session's records: chat history rows and how finished turns went."""

from __future__ import annotations

from enum import StrEnum

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.turn import EndCause, Outcome


class ItemKind(StrEnum):
    """Kinds of chat history rows."""

    USER = "user"
    ASSISTANT = "assistant"
    REASONING = "reasoning"
    TOOL = "tool"
    SYSTEM = "system"
    ERROR = "error"


TOOL_REFUSED = "refused"
"""The status of a tool whose write the sandbox refused (domain/sandbox_refusal.py tells)."""
TOOL_STATUS_WORDS: dict[str, str] = {
    "running": "running",
    "waiting": "waiting for permission",
    "completed": "completed",
    "failed": "failed",
    "rejected": "rejected",
    TOOL_REFUSED: "refused by the sandbox",
    "interrupted": "interrupted",
    "cancelled": "cancelled",
}
"""A tool row's status in words, as every surface says it (the dashboard, ``follow``)."""


@dataclass(frozen=True, slots=True)
class ChatItem:
    """One row of chat history. Tool rows are replaced in place as their status changes."""

    kind: ItemKind
    text: str
    at: float
    """Wall-clock epoch seconds."""
    tool_call_id: str | None = None
    tool_name: str = ""
    tool_status: str = ""
    """running / waiting (its permission prompt is open) / completed / failed / rejected /
    refused (by the sandbox) / interrupted / cancelled: :data:`TOOL_STATUS_WORDS`."""
    tool_detail: str = ""
    interrupted: bool = False
    """An assistant reply cut short (stop, watchdog, crash); the text is kept."""


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """How a finished turn went."""

    seq: int
    prompt: str
    outcome: Outcome
    reason: str
    """Why, for people (shown in the chat, the sidebar, ``status`` and ``run``)."""
    started_at: float
    ended_at: float
    tool_calls: int
    successful_tools: int
    detail: str = ""
    """The technical why (watchdog tier, last event type) for logs and replay; ``reason`` is for people."""
    refused: tuple[str, ...] = ()
    """Permission requests refused during the turn (their titles)."""
    cause: EndCause = EndCause.IDLE
    """Why, for code: what ended the turn."""
