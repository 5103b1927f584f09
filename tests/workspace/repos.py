"""Real git repositories in a temporary folder, made with the git CLI."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def run(cwd: Path, *args: str) -> str:
    """``git args`` in ``cwd``; its output, stripped (raises when git fails)."""
    env = {**os.environ, **IDENTITY}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit(folder: Path, message: str) -> str:
    """Commit everything in ``folder``; returns the commit id."""
    run(folder, "add", "--all")
    run(folder, "commit", "--quiet", "-m", message)
    return run(folder, "rev-parse", "HEAD")


def make_repo(folder: Path, files: dict[str, str] | None = None) -> Path:
    """A repository on ``main`` with one commit of ``files`` (a README by default)."""
    folder.mkdir(parents=True)
    run(folder, "init", "--quiet", "-b", "main")
    for name, text in (files or {"README.md": "hello\n"}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    commit(folder, "first")
    return folder
