"""Running the git CLI: one async call, bounded in time and output, errors in words.

git is the engine for everything in this package (worktrees, diffs, merges); nothing here
reimplements it. Calls never prompt (no terminal, no credential helper questions) and never
read the user's pager or colour settings.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_TIMEOUT = 60.0
MAX_OUTPUT = 64 * 1024 * 1024
"""A diff larger than this is cut (the view says so) rather than held whole in memory."""


class WorkspaceError(Exception):
    """Something about a folder, a repository or a git call that the user must be told."""


class GitMissing(WorkspaceError):
    """The git command is not installed."""


@dataclass(frozen=True, slots=True)
class GitResult:
    """What one git call printed, and how it ended."""

    code: int
    out: bytes
    err: str
    truncated: bool = False

    @property
    def text(self) -> str:
        """Standard output as text (invalid UTF-8 replaced, never dropped)."""
        return self.out.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        return self.code == 0


def git_binary() -> str:
    """The git executable, or :class:`GitMissing`."""
    found = shutil.which("git")
    if found is None:
        raise GitMissing("git is not installed: worktrees, change counts and diffs need the git command")
    return found


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GIT_TERMINAL_PROMPT="0",  # a push that needs a password fails instead of hanging
        GIT_PAGER="cat",
        GIT_EDITOR="true",  # a merge never opens an editor for its message
        LC_ALL="C",  # messages we match on (conflicts) are not translated
        GIT_OPTIONAL_LOCKS="0",  # status and diff never fight the agent for the index lock
    )
    # ssh ignores GIT_TERMINAL_PROMPT and would ask on /dev/tty, over the dashboard.
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    return env


async def git(
    args: Sequence[str],
    cwd: str,
    *,
    check: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    stdin: bytes | None = None,
) -> GitResult:
    """Run ``git args`` in ``cwd``; with ``check``, a non-zero exit raises :class:`WorkspaceError`
    naming the command and git's own message."""
    # No fsmonitor hook: a command a repository's config names never runs behind the user's back.
    command = [git_binary(), "-c", "color.ui=false", "-c", "core.quotepath=false", "-c", "core.fsmonitor=false", *args]
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            cwd=cwd,
            env=_environment(),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # no controlling terminal: nothing can prompt over the dashboard
        )
    except FileNotFoundError:
        raise WorkspaceError(f"the folder {cwd} does not exist") from None
    except NotADirectoryError:
        raise WorkspaceError(f"{cwd} is not a folder") from None
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise WorkspaceError(f"git {args[0]} did not finish within {timeout:.0f} s in {cwd}") from None
    except asyncio.CancelledError:
        if proc.returncode is None:
            proc.kill()
        raise
    truncated = len(out) > MAX_OUTPUT
    result = GitResult(proc.returncode or 0, out[:MAX_OUTPUT], err.decode("utf-8", "replace"), truncated)
    if check and not result.ok:
        raise WorkspaceError(f"git {' '.join(args[:2])} failed in {cwd}: {describe(result)}")
    return result


def describe(result: GitResult) -> str:
    """git's message, in a line or a few (its stderr, else its stdout)."""
    text = (result.err.strip() or result.text.strip() or f"exit code {result.code}").splitlines()
    lines = [line.removeprefix("fatal: ").removeprefix("error: ").strip() for line in text if line.strip()]
    return "; ".join(lines[:4])
