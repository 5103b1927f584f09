"""Session details: where the agent runs, how it was started, where it logs, what it said last.

The place to look when a session fails: the agent's own last stderr lines are here, with
the paths of every log, the folder it works in and the prompts still queued.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from polypilot_tui.domain.limits import size_words
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.view import SessionDetails, SessionView
from polypilot_tui.ui.formatting import STATUS_LABELS, safe_text

PLAN_MARKS = {"completed": "✓", "in_progress": "▸", "pending": "·"}
"""ACP plan entry statuses, as marks."""


def _workspace_rows(view: SessionView) -> list[tuple[str, str]]:
    """Branch, isolation and changes, for a session in git; why not, when it cannot be read."""
    rows = []
    if view.branch:
        rows.append(("Branch", view.branch + (" (its own worktree)" if view.worktree else " (in the checkout)")))
    if view.changes:
        rows.append(("Changes", view.changes.short()))
    if view.workspace_problem:
        rows.append(("Workspace", f"cannot be read: {one_line(view.workspace_problem, 200)}"))
    return rows


def _sandbox_words(view: SessionView) -> str:
    if not view.sandbox.on:
        return "off: the agent runs with your rights"
    rule = " · with a network rule" if view.sandbox.network is not None else ""
    return f"{view.sandbox.mode.value}: it writes only its folder and its own state{rule}"


def _policy_words(details: SessionDetails) -> str:
    policy = details.permission_policy
    if policy == "allow-in-sandbox":
        why = " (a sandboxed fan-out's attempt)" if details.view.attempt_of else ""
        return f"{policy}{why}: approves inside its folder, asks the rest"
    return policy


def details_text(details: SessionDetails) -> str:
    """The details as plain text (what the screen shows; also easy to test)."""
    view = details.view
    label = view.failure.title.capitalize() if view.failure is not None else STATUS_LABELS[view.status]
    status = label + (f" — {one_line(view.reason, 200)}" if view.reason else "")
    rows = [
        ("Session", f"{view.name} ({view.id})"),
        ("Status", status),
        *([("Fix", view.failure.fix)] if view.failure is not None else []),
        ("Agent", f"{view.agent} ({details.agent_kind})" + (f" · model {view.model}" if view.model else "")),
        ("Command", details.command or "—"),
        ("Folder", details.folder or "—"),
        *_workspace_rows(view),
        ("Sandbox", _sandbox_words(view)),
        *([("Permissions", _policy_words(details))] if details.permission_policy else []),
        ("State folder", details.state_folder),
        (
            "Agent session",
            (view.agent_session_id or "—") + (f" · {details.connected_how}" if details.connected_how else ""),
        ),
    ]
    rows += [(label, path) for label, path in details.log_paths]
    width = max(len(label) for label, _ in rows)
    lines = [f"{label.ljust(width)}  {value}" for label, value in rows]
    if view.queue:
        lines += ["", f"Queued prompts ({len(view.queue)}){' — held' if view.queue_held else ''}:"]
        lines += [
            f"  {i + 1}. {prompt.preview or f'a prompt of {size_words(prompt.size)}'}"
            for i, prompt in enumerate(view.queue)
        ]
    if details.sandbox_rules:
        lines += ["", "What its sandbox allows:"]
        lines += [f"  {safe_text(rule)}" for rule in details.sandbox_rules]
    if details.plan:
        lines += ["", "The agent's plan:"]
        lines += [f"  {PLAN_MARKS.get(status, '·')} {safe_text(step)}" for step, status in details.plan]
    lines += [
        "",
        "Last lines the agent wrote to stderr:" if details.stderr_tail else "The agent wrote nothing to stderr.",
    ]
    lines += [f"  {safe_text(line)}" for line in details.stderr_tail]
    return "\n".join(lines)


class SessionDetailsScreen(ModalScreen[None]):
    """A read-only panel; Escape or Enter closes it."""

    DEFAULT_CSS = """
    SessionDetailsScreen {
        align: center middle;
        background: $background 60%;
    }
    SessionDetailsScreen #details-dialog {
        width: 110;
        max-width: 95%;
        height: auto;
        max-height: 90%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    SessionDetailsScreen #details-title {
        text-style: bold;
        padding-bottom: 1;
    }
    SessionDetailsScreen #details-body {
        height: auto;
        max-height: 40;
    }
    SessionDetailsScreen #details-hint {
        color: $text-muted;
        padding-top: 1;
    }
    """

    BINDINGS = [Binding("escape,enter,q", "close", "Close")]

    def __init__(self, details: SessionDetails) -> None:
        super().__init__()
        self.details = details

    def compose(self) -> ComposeResult:
        with Vertical(id="details-dialog"):
            yield Static(f"Session details — {one_line(self.details.view.name, 60)}", id="details-title", markup=False)
            with VerticalScroll(id="details-body"):
                yield Static(details_text(self.details), id="details-text", markup=False)
            yield Static("Esc to close · select text with the mouse to copy it", id="details-hint", markup=False)

    def action_close(self) -> None:
        """Back to the chat."""
        self.dismiss(None)
