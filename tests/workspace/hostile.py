"""A repository that names programs in its own config and hooks, each of which leaves a mark.

Every program is a script of its own that touches ``markers/<its name>``: a test runs the
app's git calls and then lists the folder, so a failure says which program ran.
"""

from __future__ import annotations

from pathlib import Path

from tests.workspace.repos import make_repo, run

HOOKS = (
    "post-checkout",
    "reference-transaction",
    "post-index-change",
    "pre-auto-gc",
    "post-merge",
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-merge-commit",
    "pre-push",
    "post-rewrite",
)
"""Hooks git runs around the commands the app runs (worktree add, branch, status, commit…)."""


class Marks:
    """Scripts under ``bin/`` that each leave ``markers/<name>`` when they run."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.folder = root / "markers"
        self.bin.mkdir(parents=True)
        self.folder.mkdir()

    def program(self, name: str, *, filter_: bool = False) -> str:
        """The path of a script marking ``name``. A filter passes its input through; any
        other program prints the file it is given (a textconv), if any, and reads nothing."""
        path = self.bin / name
        body = "exec cat" if filter_ else '[ -f "$1" ] && cat "$1"\nexit 0'
        path.write_text(f"#!/bin/sh\ntouch '{self.folder / name}'\n{body}\n")
        path.chmod(0o755)
        return str(path)

    def ran(self) -> list[str]:
        """The programs that ran, by name."""
        return sorted(path.name for path in self.folder.iterdir())

    def clear(self) -> None:
        for path in self.folder.iterdir():
            path.unlink()


def arm(repo: Path, marks: Marks) -> None:
    """Make ``repo``'s own config and hooks name a program for every key that can name one
    around the commands the app runs (see polypilot_tui/workspace/git.py); its
    ``.gitattributes`` is :data:`ATTRIBUTES`."""
    config = {
        "filter.evil.clean": marks.program("filter-clean", filter_=True),
        "filter.evil.smudge": marks.program("filter-smudge", filter_=True),
        "filter.evil.required": "true",
        "filter.proc.process": marks.program("filter-process"),
        "diff.evil.textconv": marks.program("textconv"),
        "diff.evil.command": marks.program("diff-driver"),
        "diff.external": marks.program("diff-external"),
        "merge.evil.driver": marks.program("merge-driver"),
        "core.fsmonitor": marks.program("fsmonitor"),
        "core.pager": marks.program("pager"),
        "pager.diff": marks.program("pager-diff"),
        "core.editor": marks.program("editor"),
        "core.askPass": marks.program("askpass"),
        "core.sshCommand": marks.program("ssh-command"),
        "credential.helper": marks.program("credential-helper"),
        "gpg.program": marks.program("gpg"),
        "log.showSignature": "true",
    }
    for key, value in config.items():
        run(repo, "config", key, value)
    hooks = repo / ".git" / "hooks"
    for hook in HOOKS:
        Path(marks.program(f"hook-{hook}")).rename(hooks / hook)


ATTRIBUTES = "*.txt filter=evil diff=evil merge=evil\n*.md filter=proc\n"
"""Text files go through the ``evil`` drivers, markdown through the ``proc`` process filter."""


def hostile_repo(root: Path) -> tuple[Path, Marks]:
    """A repository with text and markdown files committed, then armed."""
    marks = Marks(root)
    files = {".gitattributes": ATTRIBUTES, "a.txt": "one\ntwo\n", "notes.md": "# notes\n", "README": "hello\n"}
    repo = make_repo(root / "repo", files)
    arm(repo, marks)
    return repo, marks
