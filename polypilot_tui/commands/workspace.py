"""Sessions' folders and worktrees for scripts: ``new``, ``diff`` and ``finish``.

Each is the verbs the dashboard uses, asked of the state folder's engine (started when none
runs), so git runs where the sessions do and in one implementation: ``new`` adds the session
as ctrl+n does (every attached dashboard shows it at once), ``diff`` reads the diff view's
pages, ``finish`` is the Finish dialog's buttons (a discarded worktree shows as gone in the
dashboard).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from polypilot_tui.commands.live import CommandFailed, find_view, run_command
from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.domain.workspace import Workspace, branch_name_for
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
    SESSIONS,
    Commit,
    Discard,
    Merge,
    NewSession,
    NoArgs,
    PullRequest,
    Push,
    SessionRef,
)
from polypilot_tui.service.client import EngineClient
from polypilot_tui.service.spawn import ensure_engine
from polypilot_tui.storage.registry import Registry
from polypilot_tui.workspace import finish
from polypilot_tui.workspace.git import WorkspaceError
from polypilot_tui.workspace.worktrees import create_worktree, in_place, inspect_folder

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
SAVE_WAIT = 5.0
"""Seconds ``new`` waits for the engine to save the session it made (it writes within 0.5 s)."""


def _fail(message: str, code: int = EXIT_FAILED) -> int:
    print(f"polypilot: {message}", file=sys.stderr)
    return code


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
) -> int:
    """Add a session in ``cwd`` (or a new worktree of it) to the state folder's engine (started
    when none runs); prints its id, folder and branch once the engine has saved it."""
    if agent not in catalog.agents:
        return _fail(f"{catalog.missing(agent)} (see `polypilot agents`)", EXIT_USAGE)
    try:
        path, _started = await ensure_engine(settings)
    except EngineError as exc:
        return _fail(str(exc))
    client = EngineClient(path)
    try:
        label = name or f"{agent}-{len((await client.call(SESSIONS, NoArgs())).sessions) + 1}"
        try:
            info = await inspect_folder(cwd)
            if worktree:
                workspace = await create_worktree(info, branch or branch_name_for(label), base, settings.worktree_root)
            elif info.is_git:
                workspace = in_place(info)
            else:
                workspace = Workspace(info.folder)
        except WorkspaceError as exc:
            return _fail(str(exc))
        try:
            sid = await client.call(NEW_SESSION, NewSession(agent, label, workspace))
        except EngineError as exc:
            undone = await finish.unmake(workspace)
            return _fail(f"{exc}" + (f" ({undone})" if undone else ""))
    except EngineError as exc:
        return _fail(str(exc))
    finally:
        await client.aclose()
    await _saved(Path(settings.state_dir), sid)
    where = f" on {workspace.branch}" if workspace.branch else ""
    print(f"{sid}\t{workspace.folder}{where}")
    return EXIT_OK


async def _saved(state: Path, sid: str, timeout: float = SAVE_WAIT) -> None:
    """Until the engine has written ``sid`` to the saved list (``diff`` and ``finish`` read it)."""
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
                print(f"+{count.added}\t\u2212{count.removed}\t{count.path}{tag}")
            if counted.more:
                print(f"… and {counted.more} more files")
            print(counted.total.short() if counted.total else "no changes")
            return EXIT_OK
        diff = await read_diff(client, view.id)
        sys.stdout.write(diff.text)
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
            print(f"committed {await client.call(COMMIT, Commit(sid, text))}")
        elif action == "merge":
            result = await client.call(MERGE, Merge(sid, fast_forward_only))
            if not result.merged:
                for name in result.conflicts:
                    print(f"conflict\t{name}")
                raise CommandFailed(result.message)
            print(result.message)
        elif action == "push":
            print(await client.call(PUSH, Push(sid, remote)))
        elif action == "pr":
            print(await client.call(PULL_REQUEST, PullRequest(sid, body=message or "")))
        elif action == "discard":
            try:
                print(await client.call(DISCARD, Discard(sid, force)))
            except EngineError as exc:
                hint = " (--force throws it away)" if "nothing was removed" in str(exc) else ""
                raise CommandFailed(f"{exc}{hint}") from None
        else:
            raise CommandFailed(f"unknown action {action!r}", EXIT_USAGE)
        return EXIT_OK

    return await run_command(settings, True, body)
