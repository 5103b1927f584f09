"""A real git repository in a temp folder, and its diff as the workspace layer takes it.

Tests and benchmarks parse what real git prints, not hand-written diffs: quoting, renames,
binary markers and ``\\ No newline`` come out exactly as users will see them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from polypilot_tui.domain.changeset import Changeset
from polypilot_tui.workspace.diff_parse import parse_diff

_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
}


class GitRepo:
    """``git init`` in ``root``; write files as bytes, commit, and read the diff against a base."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._env = {**os.environ, **_ENV, "HOME": str(root.parent)}  # no developer config leaks in
        self.git("init", "-q", "-b", "main")
        self.git("config", "core.autocrlf", "false")

    def git(self, *args: str, ok: tuple[int, ...] = (0,)) -> bytes:
        done = subprocess.run(["git", *args], cwd=self.root, env=self._env, capture_output=True, check=False)
        if done.returncode not in ok:
            raise RuntimeError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace')}")
        return done.stdout

    def write(self, name: str | bytes, content: bytes | str) -> None:
        data = content.encode() if isinstance(content, str) else content
        path = os.path.join(os.fsencode(self.root), name if isinstance(name, bytes) else name.encode())
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(data)

    def commit(self, message: str = "base") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD").decode().strip()

    def untracked(self) -> list[bytes]:
        out = self.git("ls-files", "--others", "--exclude-standard", "-z")
        return [name for name in out.split(b"\0") if name]

    def diff_text(self, base: str) -> str:
        """``git diff -M <base>`` then one ``--no-index`` diff per untracked file, as one text."""
        parts = [self.git("diff", "--no-color", "--no-ext-diff", "-M", base)]
        for name in self.untracked():
            parts.append(
                self.git(
                    "diff", "--no-color", "--no-ext-diff", "--no-index", "--", "/dev/null", os.fsdecode(name), ok=(0, 1)
                )
            )
        return b"".join(parts).decode("utf-8", errors="replace")

    def changeset(self, base: str, **options: int) -> Changeset:
        names = [os.fsdecode(name) for name in self.untracked()]
        return parse_diff(self.diff_text(base), base, untracked=names, **options)
