"""Sessions' folders and worktrees for scripts: ``new``, ``diff`` and ``finish``.

``new`` asks the state folder's engine (started when none runs) to add the session, as the
dashboard's ctrl+n does: every attached dashboard shows it at once. ``diff`` only reads.
``finish`` acts on the session's worktree through git and never on the saved list; a
discarded worktree shows as gone in the dashboard.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from polypilot_tui.commands.live import CommandFailed, find_view, run_command
from polypilot_tui.commands.resolve import NoSuchSession, pick_session
from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.domain.workspace import Workspace, branch_name_for
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.diff_pages import read_diff
from polypilot_tui.engine.registry_sync import workspace_of
from polypilot_tui.engine.verbs import DIFF_STAT, NEW_SESSION, SESSIONS, NewSession, NoArgs, SessionRef
from polypilot_tui.service.client import EngineClient
from polypilot_tui.service.spawn import ensure_engine
from polypilot_tui.storage.history import HISTORY_FILE
from polypilot_tui.storage.registry import Registry, SessionRecord
from polypilot_tui.storage.saved_rows import SavedRows
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


def find_session(settings: Settings, key: str) -> SessionRecord:
    """A saved session by id, or by name when exactly one has it."""
    sessions = Registry(Path(settings.state_dir)).load(repair=False).sessions
    try:
        return pick_session(key, sessions, lambda r: r.id, lambda r: r.name)
    except NoSuchSession as exc:
        raise WorkspaceError(str(exc).replace("polypilot ls", "polypilot status")) from None


def _prompts(settings: Settings, sid: str) -> list[str]:
    """The session's prompts as saved (the engine writes them within a second of each send)."""
    rows = SavedRows(Path(settings.state_dir) / HISTORY_FILE)
    try:
        return rows.prompts(sid) or []
    finally:
        rows.close()


def _workspace(settings: Settings, key: str) -> tuple[SessionRecord, Workspace]:
    record = find_session(settings, key)
    workspace = workspace_of(record)
    if workspace is None or not workspace.is_git:
        raise WorkspaceError(f"the session {record.name!r} does not work in a git repository")
    return record, workspace


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
    """Commit, merge, push, open a pull request for, or discard the session's worktree."""
    try:
        record, workspace = _workspace(settings, key)
        if not workspace.owned:  # `git add --all` in the user's own checkout would sweep up their work
            raise WorkspaceError(
                f"the session {record.name!r} works in {workspace.folder} itself, not in a worktree of its own: "
                "commit, merge and push there with git"
            )
        if action == "commit":
            text = message or await finish.draft_commit_message(workspace, _prompts(settings, record.id))
            print(f"committed {await finish.commit_all(workspace, text)}")
        elif action == "merge":
            result = await finish.merge_into_base(workspace, fast_forward_only=fast_forward_only)
            if not result.merged:
                for name in result.conflicts:
                    print(f"conflict\t{name}")
                return _fail(result.message)
            print(result.message)
        elif action == "push":
            print(await finish.push_branch(workspace, remote))
        elif action == "pr":
            draft = await finish.draft_commit_message(workspace, _prompts(settings, record.id))
            title, _, body = draft.partition("\n")
            print(
                await finish.open_pull_request(workspace, title.strip(), body.strip() if message is None else message)
            )
        elif action == "discard":
            print(await finish.discard(workspace, force=force))
        else:
            return _fail(f"unknown action {action!r}", EXIT_USAGE)
    except WorkspaceError as exc:
        hint = " (--force throws it away)" if action == "discard" and "nothing was removed" in str(exc) else ""
        return _fail(f"{exc}{hint}")
    return EXIT_OK
