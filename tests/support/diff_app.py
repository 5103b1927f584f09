"""A sample changeset from a real git repository, and a tiny app that opens the diff view on it.

Used by the Pilot tests, the snapshots and the benchmark: the screen is seen as the lead's
one-line integration will show it, on the app's own themes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import Static

from polypilot_tui.domain.changeset import Changeset, ReviewComment
from polypilot_tui.ui.screens.diff_view import DiffViewResult, DiffViewScreen
from polypilot_tui.ui.theming import APP_VARIABLES, BUNDLED_DIR, load_themes
from tests.support.git_repo import GitRepo

APP_BEFORE = """\
import os


def greet(name):
\treturn "hello " + name


def main():
    print(greet("world"))
    return 0
"""

APP_AFTER = """\
import os
import sys


def greet(name: str) -> str:
\treturn f"hello {name}"


def main():
    print(greet(sys.argv[1] if len(sys.argv) > 1 else "world"))
    return 0
"""

HOSTILE = "<b>x</b>\n[bold]y[/]\n\x1b[31mred\n🎉 party 🎉\n漢字かな混じり\n\tindented\tcells\n"
"""What an agent may write into a file: HTML, Rich markup, an escape sequence, wide characters, tabs."""


def sample_repo(root: Path) -> tuple[GitRepo, Changeset]:
    """Five kinds of change against a base commit: modified, renamed, binary, deleted, untracked."""
    repo = GitRepo(root)
    repo.write("src/app.py", APP_BEFORE)
    repo.write("README.md", "# Demo\n\nA demo project.\n\nIt does things.\n")
    repo.write("old.txt", "obsolete\nfile\n")
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(64)))
    base = repo.commit()
    repo.write("src/app.py", APP_AFTER)
    (repo.root / "docs").mkdir()
    repo.git("mv", "README.md", "docs/README.md")
    repo.write("docs/README.md", "# Demo\n\nA demo project.\n\nIt does many things.\n")
    (repo.root / "old.txt").unlink()
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(64, 0, -1)))
    repo.write("hostile.txt", HOSTILE)
    return repo, repo.changeset(base)


class DiffHostApp(App[None]):
    """Opens the diff view at once and keeps what it returns."""

    def __init__(
        self,
        changes: Changeset,
        *,
        comments: tuple[ReviewComment, ...] = (),
        theme: str = "polypilot-night",
        **screen: Any,
    ) -> None:
        super().__init__()
        self.changes = changes
        self.comments = comments
        self.results: list[DiffViewResult] = []
        self._screen_options = {"session": "refactor", "branch": "polypilot/refactor", **screen}
        for loaded in load_themes(BUNDLED_DIR).themes:
            self.register_theme(loaded)
        self.theme = theme

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_VARIABLES)

    def compose(self) -> ComposeResult:
        yield Static("the dashboard", markup=False)

    def on_mount(self) -> None:
        self.push_screen(
            DiffViewScreen(self.changes, comments=self.comments, **self._screen_options), self.results.append
        )

    @property
    def diff_screen(self) -> DiffViewScreen:
        screen = self.screen_stack[1]
        assert isinstance(screen, DiffViewScreen)
        return screen
