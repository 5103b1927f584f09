"""Sessions' folders and worktrees for scripts: ``new``, ``diff`` and ``finish``.

Each is the verbs the dashboard uses, asked of the state folder's engine (started when none
runs), so git runs where the sessions do and in one implementation: ``new`` adds the session
as ctrl+n does (every attached dashboard shows it at once), ``diff`` reads the diff view's
pages, ``finish`` is the Finish dialog's buttons (a discarded worktree shows as gone in the
dashboard).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from polypilot_tui.commands.live import HOST, CommandFailed, find_view, run_command
from polypilot_tui.commands.output import say
from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.domain.sandbox import Sandbox
from polypilot_tui.domain.workspace import Isolation
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.diff_pages import read_diff
from polypilot_tui.engine.verbs import (
    COMMIT,
    COMMIT_MESSAGE,
    DIFF_STAT,
    DISCARD,
    MERGE,
    NEW_SESSION,
    PULL_REQUEST,
    PUSH,
    SESSION_VIEW,
    Commit,
    Discard,
    Merge,
    NewSession,
    PullRequest,
    Push,
    SessionRef,
)
from polypilot_tui.service.client import EngineClient
from polypilot_tui.storage.registry import Registry

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
SAVE_WAIT = 5.0
"""Seconds ``new`` waits for the engine to save the session it made (it writes within 0.5 s)."""


async def cmd_new(
    settings: Settings,
    catalog: AgentCatalog,
    agent: str,
    *,
    name: str | None,
    cwd: str,
    worktree: bool,
    branch: str | None,
    base: str,
    sandbox: Sandbox | None = None,
) -> int:
    """Add a session in ``cwd`` (or a new worktree of it, made by the engine) to the state
    folder's engine (started when none runs); prints its id, folder and branch once the engine
    has saved it."""
    remote = HOST.get() is not None  # --host: the agents and folders are that machine's
    if not remote and agent not in catalog.agents:
        say(f"polypilot: {catalog.missing(agent)} (see `polypilot agents`)", err=True)
        return EXIT_USAGE
    if remote and not (cwd.startswith(("~", "/")) or cwd == "."):
        say("polypilot: with --host, give --cwd as an absolute path or under ~ (that machine's)", err=True)
        return EXIT_USAGE
    folder = cwd if cwd.startswith("~") else os.path.abspath(cwd)  # the engine's own folder is not ours
    if remote:
        folder = "~" if cwd == "." else cwd
    isolation = Isolation.WORKTREE if worktree else Isolation.FOLDER
    request = NewSession(agent, name, folder, isolation, branch or "", base, sandbox)

    async def body(client: EngineClient) -> int:
        sid = await client.call(NEW_SESSION, request)
        view = await client.call(SESSION_VIEW, SessionRef(sid))
        if not remote:  # its state folder is here to look at
            await _saved(Path(settings.state_dir), sid)
        where = f" on {view.branch}" if view.branch else ""
        say(f"{sid}\t{view.workspace.folder if view.workspace else view.cwd}{where}")
        return EXIT_OK

    return await run_command(settings, True, body)


async def _saved(state: Path, sid: str, timeout: float = SAVE_WAIT) -> None:
    """Until the engine has written ``sid`` to the saved list (``status`` reads it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if any(r.id == sid for r in Registry(state).load(repair=False).sessions):
            return
        await asyncio.sleep(0.05)


async def cmd_diff(settings: Settings, key: str, *, stat: bool) -> int:
    """Print the session's changes against its base, as its engine reads them: the diff, or a
    line per file with the totals."""

    async def body(client: EngineClient) -> int:
        view = await find_view(client, key)
        if stat:
            counted = await client.call(DIFF_STAT, SessionRef(view.id))
            for count in counted.files:
                tag = " (binary)" if count.binary else " (new)" if count.untracked else ""
                say(f"+{count.added}\t\u2212{count.removed}\t{count.path}{tag}")
            if counted.more:
                say(f"… and {counted.more} more files")
            say(counted.total.short() if counted.total else "no changes")
            return EXIT_OK
        diff = await read_diff(client, view.id)
        say(diff.text, data=True)
        if diff.truncated:
            raise CommandFailed("the diff was cut: it is larger than the limit")
        return EXIT_OK

    return await run_command(settings, True, body)


async def cmd_finish(
    settings: Settings,
    key: str,
    action: str,
    *,
    message: str | None = None,
    fast_forward_only: bool = False,
    force: bool = False,
    remote: str = "origin",
) -> int:
    """Commit, merge, push, open a pull request for, or discard the session's worktree, through
    its engine (the same verbs as the dashboard's Finish)."""

    async def body(client: EngineClient) -> int:
        sid = (await find_view(client, key)).id
        if action == "commit":
            text = message if message else await client.call(COMMIT_MESSAGE, SessionRef(sid))
            say(f"committed {await client.call(COMMIT, Commit(sid, text))}")
        elif action == "merge":
            result = await client.call(MERGE, Merge(sid, fast_forward_only))
            if not result.merged:
                for name in result.conflicts:
                    say(f"conflict\t{name}")
                raise CommandFailed(result.message)
            say(result.message)
        elif action == "push":
            say(await client.call(PUSH, Push(sid, remote)))
        elif action == "pr":
            say(await client.call(PULL_REQUEST, PullRequest(sid, body=message or "")))
        elif action == "discard":
            try:
                say(await client.call(DISCARD, Discard(sid, force)))
            except EngineError as exc:
                hint = " (--force throws it away)" if "nothing was removed" in str(exc) else ""
                raise CommandFailed(f"{exc}{hint}") from None
        else:
            raise CommandFailed(f"unknown action {action!r}", EXIT_USAGE)
        return EXIT_OK

    return await run_command(settings, True, body)
