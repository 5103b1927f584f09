"""What a session changed, to review: the files on the left, the diff on the right, comments.

The screen receives its data (a changeset, names, earlier comments) and never runs git: a
refresh (``r``) calls the ``refresh`` it was given, which asks the engine for the diff again.
It dismisses with every comment either way, so unsent comments survive a closed screen;
``send`` says whether the user asked to send them to the agent as one review.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from polypilot_tui.domain.changeset import Changeset, ReviewComment
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.ui.formatting import plural
from polypilot_tui.ui.screens.review_comment import ReviewCommentScreen
from polypilot_tui.ui.widgets.diff_highlight import clean
from polypilot_tui.ui.widgets.diff_lines import STATUS_GLYPHS, DiffLines
from polypilot_tui.ui.widgets.diff_rows import comment_anchor, comment_at
from polypilot_tui.ui.widgets.key_footer import KeyFooter

_COMMIT = re.compile(r"[0-9a-f]{13,40}")


@dataclass(frozen=True, slots=True)
class DiffViewResult:
    """Every comment when the screen closed, and whether to send them as a review."""

    comments: tuple[ReviewComment, ...]
    send: bool


def diff_title(session: str, branch: str, changes: Changeset) -> str:
    """``Changes of <session> · <branch> vs <base> · 3 files +120 −4``."""
    base = changes.base[:12] if _COMMIT.fullmatch(changes.base) else changes.base
    where = f"{branch} vs {base}" if branch else f"vs {base}"
    return f"Changes of {session} · {where} · {changes.stats.short()}"


class DiffViewScreen(Screen[DiffViewResult]):
    """The review screen for one session's changeset."""

    CSS_PATH = "diff_view.tcss"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (90, "-wide")]
    """Below 90 columns the file list goes: the diff needs the room (``n``/``p`` still move)."""

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("s", "toggle_split", "Split"),
        Binding("n", "file(1)", "Next file"),
        Binding("p", "file(-1)", "Prev file"),
        Binding("c", "comment", "Comment"),
        Binding("e", "edit", "Edit"),
        Binding("x", "delete", "Delete"),
        Binding("R", "send", "Send review"),
        Binding("r", "refresh", "Refresh"),
    ]

    def __init__(
        self,
        changes: Changeset,
        *,
        session: str,
        branch: str = "",
        comments: Sequence[ReviewComment] = (),
        refresh: Callable[[], Awaitable[Changeset | None]] | None = None,
    ) -> None:
        super().__init__()
        self._refresh = refresh
        """Reads the diff again (``r``); None when nothing can (it says so)."""
        self.changes = changes
        self.session = session
        self.branch = branch
        self.comments: tuple[ReviewComment, ...] = tuple(comments)

    def compose(self) -> ComposeResult:
        yield Static(id="diff-title", markup=False)
        with Horizontal(id="diff-body"):
            yield OptionList(id="diff-files")
            yield DiffLines(id="diff-lines")
        yield Static(id="diff-empty", markup=False)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.set_changeset(self.changes)
        self.query_one(DiffLines).focus()

    # ---- data ----------------------------------------------------------------------
    def set_changeset(self, changes: Changeset) -> None:
        """Show ``changes`` (first or refreshed); the comments stay."""
        self.changes = changes
        files = self.query_one("#diff-files", OptionList)
        files.clear_options()
        files.add_options([Option(self._file_prompt(i)) for i in range(len(changes.files))])
        lines = self.query_one(DiffLines)
        lines.show(changes, self.comments)
        row = lines.row_at_cursor()
        files.highlighted = row.file if row is not None else None
        empty = not changes.files
        self.query_one("#diff-body").display = not empty
        self.query_one("#diff-empty", Static).update(f"No changes against {changes.base}." if empty else "")
        self.query_one("#diff-empty").display = empty
        self._update_title()

    def _file_prompt(self, index: int) -> Content:
        diff = self.changes.files[index]
        return Content.assemble(
            (f"{STATUS_GLYPHS[diff.status]} ", "$text-accent"),
            clean(diff.path),
            (f" +{diff.added}", "$text-success"),
            (f" \u2212{diff.removed}", "$text-error"),
        )

    def _update_title(self) -> None:
        title = diff_title(self.session, self.branch, self.changes)
        if self.comments:
            title += f" · {plural(len(self.comments), 'comment')}"
        self.query_one("#diff-title", Static).update(clean(title))

    def _set_comments(self, comments: tuple[ReviewComment, ...]) -> None:
        self.comments = comments
        self.query_one(DiffLines).set_comments(comments)
        self._update_title()

    # ---- file list and diff ----------------------------------------------------------
    @on(OptionList.OptionSelected, "#diff-files")
    def _file_chosen(self, event: OptionList.OptionSelected) -> None:
        lines = self.query_one(DiffLines)
        lines.jump_to_file(event.option_index)
        lines.focus()

    @on(DiffLines.CursorMoved)
    def _follow_cursor(self, event: DiffLines.CursorMoved) -> None:
        files = self.query_one("#diff-files", OptionList)
        if files.highlighted != event.file:
            files.highlighted = event.file

    # ---- actions -------------------------------------------------------------------
    def action_close(self) -> None:
        """Back, keeping the comments unsent."""
        self.dismiss(DiffViewResult(self.comments, send=False))

    def action_send(self) -> None:
        """Back, sending every comment to the agent as one review."""
        if not self.comments:
            self.notify("No comments to send: press c on a line to write one.", severity="warning", timeout=4)
            return
        self.dismiss(DiffViewResult(self.comments, send=True))

    def action_refresh(self) -> None:
        """Read the diff again (the agent may have changed files since)."""
        if self._refresh is None:
            return
        refresh = self._refresh

        async def refreshed() -> None:
            changes = await refresh()
            if changes is not None:
                self.set_changeset(changes)

        self.run_worker(refreshed(), group="refresh", exclusive=True, exit_on_error=False)

    def action_toggle_split(self) -> None:
        """Unified, or old and new side by side."""
        lines = self.query_one(DiffLines)
        lines.split = not lines.split

    def action_file(self, step: int) -> None:
        """The next or previous file."""
        self.query_one(DiffLines).next_file(step)

    def action_comment(self) -> None:
        """Comment on the line (or hunk header) under the cursor; on a comment, edit it."""
        row = self.query_one(DiffLines).row_at_cursor()
        if row is None:
            return
        if row.kind.value == "comment":
            self.action_edit()
            return
        anchor = comment_anchor(self.changes, row)
        if anchor is None:
            self.notify("Comments go on a line or a hunk header: move the cursor down (↓) to one.", timeout=4)
            return

        def saved(text: str | None) -> None:
            if text:
                self._set_comments((*self.comments, replace(anchor, text=text)))

        self.app.push_screen(ReviewCommentScreen(anchor.where, "", anchor.quote), saved)

    def _comment_here(self) -> int | None:
        row = self.query_one(DiffLines).row_at_cursor()
        index = None if row is None else comment_at(self.changes, self.comments, row)
        if index is None:
            self.notify("No comment here.", timeout=3)
        return index

    def action_edit(self) -> None:
        """Edit the comment under the cursor."""
        index = self._comment_here()
        if index is None:
            return
        comment = self.comments[index]

        def saved(text: str | None) -> None:
            if text:
                comments = list(self.comments)
                comments[index] = replace(comment, text=text)
                self._set_comments(tuple(comments))

        self.app.push_screen(ReviewCommentScreen(comment.where, comment.text, comment.quote), saved)

    def action_delete(self) -> None:
        """Delete the comment under the cursor."""
        index = self._comment_here()
        if index is not None:
            self._set_comments(self.comments[:index] + self.comments[index + 1 :])
            self.notify("Comment deleted.", timeout=3)
