"""The attempts of a fan-out side by side: status, time, usage, changes and check, one row each.

The screen receives a :class:`~polypilot_tui.domain.fan_out.Comparison` and never asks the
engine itself: its keys call what it was given (open the diff, run the check, pick one), and
the flow that opened it hands it each fresh comparison (:meth:`CompareScreen.show`).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from polypilot_tui.domain.fan_out import Attempt, CheckResult, Comparison
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.view import SessionStatus
from polypilot_tui.ui.formatting import STATUS_ICONS, STATUS_LABELS, plural, precise_duration, safe_text
from polypilot_tui.ui.usage_text import usage_summary
from polypilot_tui.ui.widgets.key_footer import KeyFooter

CHECK_TAIL_LINES = 12
"""Lines of the highlighted attempt's check output shown under the table (its end says most)."""

COLUMNS: tuple[tuple[str, str], ...] = (
    ("attempt", "Attempt"),
    ("status", "Status"),
    ("time", "Time"),
    ("usage", "Usage"),
    ("changes", "Changes"),
    ("check", "Check"),
)
"""The table's columns: key and heading."""


def status_text(attempt: Attempt) -> str:
    """``✓ completed``, ``✎ Writing…``, ``⚑ stuck``, ``closed``, ``✕ discarded``."""
    if attempt.discarded:
        return "✕ discarded"
    try:
        status = SessionStatus(attempt.status)
    except ValueError:  # "closed": its session is gone
        return attempt.status
    if attempt.outcome:
        mark = {"completed": "✓", "aborted": "■", "stuck": "⚑"}.get(attempt.outcome, "✕")
        return f"{mark} {attempt.outcome}"
    return f"{STATUS_ICONS[status]} {STATUS_LABELS[status]}"


def check_text(attempt: Attempt, configured: bool) -> str:
    """``✓ passed 12s``, ``✗ exit 1 · 40s``, ``running…``, ``not run``, ``—`` (no check command)."""
    if attempt.checking:
        return "running…"
    check: CheckResult | None = attempt.check
    if check is None:
        return "not run" if configured else "—"
    took = precise_duration(check.seconds)
    verdict = check.verdict
    if verdict == "could not run":
        return f"✗ could not run: {one_line(check.error, 40)}"
    if verdict == "failed":
        return f"✗ exit {check.exit_code} · {took}"
    return f"{'✓' if verdict == 'passed' else '✗'} {verdict} · {took}"


def attempt_detail(comparison: Comparison, attempt: Attempt) -> str:
    """Under the table: the highlighted attempt's branch, why its turn ended, its check's output tail."""
    lines = [f"{attempt.name} · {attempt.agent}" + (f" · {attempt.branch}" if attempt.branch else "")]
    if attempt.folder:
        lines.append(f"Worktree: {attempt.folder}")
    if attempt.reason and attempt.outcome != "completed":  # a completed turn's reason is an event's name
        lines.append(f"Ended {attempt.outcome or ''}: {one_line(attempt.reason, 200)}")
    check = attempt.check
    if check is not None and check.output.strip():
        tail = safe_text(check.output).rstrip("\n").splitlines()[-CHECK_TAIL_LINES:]
        lines += ["", f"Check output ({comparison.check}), last lines:", *[f"  {line}" for line in tail]]
    elif check is not None and check.error:
        lines += ["", f"The check could not run: {one_line(check.error, 200)}"]
    return "\n".join(lines)


def compare_title(comparison: Comparison) -> str:
    """``Fan-out · 3 attempts from main · check: pytest -q``, then the task on the next line."""
    head = f"Fan-out · {len(comparison.attempts)} attempts" + (f" from {comparison.base}" if comparison.base else "")
    head += f" · check: {one_line(comparison.check, 60)}" if comparison.check else " · no check command"
    return f"{head}\nTask: {one_line(comparison.task, 200)}"


class CompareScreen(Screen[None]):
    """One row per attempt; the keys act on the highlighted one."""

    DEFAULT_CSS = """
    CompareScreen {
        layout: vertical;
    }
    CompareScreen #compare-title {
        padding: 0 1;
        text-style: bold;
        height: auto;
    }
    CompareScreen #compare-table {
        height: auto;
        max-height: 60%;
        margin: 1 0;
    }
    CompareScreen #compare-result {
        padding: 0 1;
        height: auto;
        color: $text-warning;
    }
    CompareScreen #compare-result.-done {
        color: $text-success;
    }
    CompareScreen #compare-detail {
        padding: 0 1;
        height: 1fr;
        color: $text-muted;
    }
    """

    BINDINGS = [
        Binding("escape", "close", "Back"),
        # Ids: remappable in keymap.toml like the dashboard's ("compare.pick" = "M").
        Binding("enter,d", "diff", "Diff", id="compare.diff"),
        Binding("c", "check", "Run check", id="compare.check"),
        Binding("m", "pick", "Merge this one", id="compare.pick"),
    ]

    def __init__(
        self,
        comparison: Comparison,
        *,
        open_diff: Callable[[str], None],
        run_check: Callable[[], None],
        pick: Callable[[Attempt], None],
    ) -> None:
        super().__init__()
        self.comparison = comparison
        self._open_diff = open_diff
        self._run_check = run_check
        self._pick = pick
        self._checks_said = False
        """The result line says checks run: it says when they have all ended."""

    def compose(self) -> ComposeResult:
        yield Static(compare_title(self.comparison), id="compare-title", markup=False)
        table: DataTable[str | Text] = DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        yield table
        yield Static("", id="compare-result", markup=False)
        yield Static("", id="compare-detail", markup=False)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.show(self.comparison)
        self.query_one(DataTable).focus()

    @property
    def highlighted(self) -> Attempt | None:
        """The attempt under the cursor."""
        attempts = self.comparison.attempts
        row = self.query_one(DataTable).cursor_row
        return attempts[row] if 0 <= row < len(attempts) else None

    def show(self, comparison: Comparison) -> None:
        """Draw ``comparison``; the cursor stays on its attempt."""
        table: DataTable[str | Text] = self.query_one(DataTable)
        shown = self.highlighted if table.row_count else None
        keep = shown.session_id if shown is not None else None
        self.comparison = comparison
        if self._checks_said and not any(a.checking for a in comparison.attempts):
            self.say("The check has ended in every worktree.", done=True)
        self.query_one("#compare-title", Static).update(compare_title(comparison))
        table.clear()
        configured = bool(comparison.check)
        for attempt in comparison.attempts:
            name = attempt.name + (" ★ merged" if attempt.session_id == comparison.picked else "")
            cells = (
                f"{one_line(name, 40)}\n{one_line(attempt.agent, 40)}",
                status_text(attempt),
                precise_duration(attempt.seconds),
                usage_summary(attempt.usage) or "—",
                attempt.changes.short() if attempt.changes else "no changes",
                check_text(attempt, configured),
            )
            # Text, never str: DataTable reads a str cell as markup, and names and errors are not ours.
            table.add_row(*(Text(cell) for cell in cells), key=attempt.session_id, height=2)
        ids = [a.session_id for a in comparison.attempts]
        if keep in ids:
            table.move_cursor(row=ids.index(keep), animate=False)
        self._show_detail()

    def say(self, text: str, done: bool = False) -> None:
        """What the last action did (a merge, a check started, why not)."""
        result = self.query_one("#compare-result", Static)
        result.update(text)
        result.set_class(done, "-done")
        self._checks_said = False

    def say_checks_running(self, count: int) -> None:
        """The check was started in ``count`` worktrees: said until no attempt runs it."""
        self.say(f"The check runs in {plural(count, 'worktree')}…", done=True)
        self._checks_said = True

    @on(DataTable.RowHighlighted)
    def _show_detail(self) -> None:
        attempt = self.highlighted
        text = attempt_detail(self.comparison, attempt) if attempt is not None else "No attempts."
        self.query_one("#compare-detail", Static).update(text)

    @on(DataTable.RowSelected)
    def action_diff(self) -> None:
        """The highlighted attempt's changes (the review screen: read, comment, send a review)."""
        attempt = self.highlighted
        if attempt is not None:
            self._open_diff(attempt.session_id)

    def action_check(self) -> None:
        """Run the check command in every attempt's worktree (those not running it)."""
        if not self.comparison.check:
            self.say("This fan-out has no check command.")
            return
        self._run_check()

    def action_pick(self) -> None:
        """Merge the highlighted attempt (asks first, and whether to discard the others)."""
        attempt = self.highlighted
        if attempt is not None:
            self._pick(attempt)

    def action_close(self) -> None:
        """Back to the sessions."""
        self.dismiss(None)
