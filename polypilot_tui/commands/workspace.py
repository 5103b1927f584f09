"""Sessions' folders and worktrees for scripts: ``new``, ``diff`` and ``finish``.

``new`` adds a session to the saved list (the dashboard shows it at its next start), so it
needs the state folder to itself, like the dashboard: while a dashboard runs, create the
session there (ctrl+n). ``diff`` only reads. ``finish`` acts on the session's worktree
through git and never on the saved list; a discarded worktree shows as gone in the dashboard.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.domain.workspace import Workspace
from polypilot_tui.engine.registry_sync import workspace_fields, workspace_of
from polypilot_tui.infra.private import private_dir
from polypilot_tui.storage.lock import StateFolderBusy, StateLock
from polypilot_tui.storage.registry import Registry, SessionRecord
from polypilot_tui.workspace import finish
from polypilot_tui.workspace.changes import diff_text, file_counts, totals
from polypilot_tui.workspace.git import WorkspaceError
from polypilot_tui.workspace.worktrees import branch_name_for, create_worktree, in_place, inspect_folder

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BUSY = 3


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
    clock_wall: float,
) -> int:
    """Add a session in ``cwd`` (or a new worktree of it); prints its id, folder and branch."""
    if agent not in catalog.agents:
        return _fail(f"no agent named {agent!r} (see `polypilot agents`)", EXIT_USAGE)
    state = Path(settings.state_dir)
    try:
        private_dir(state)
        lock = StateLock.acquire(state)
    except StateFolderBusy as exc:
        return _fail(f"{exc}: create the session in that dashboard (ctrl+n)", EXIT_BUSY)
    except OSError as exc:
        return _fail(f"the state folder {state} cannot be used: {exc}")
    try:
        registry = Registry(state)
        snapshot = registry.load()
        if snapshot.problem:
            return _fail(f"the saved session list cannot be used: {snapshot.problem}")
        label = name or f"{agent}-{len(snapshot.sessions) + 1}"
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
        record = SessionRecord(
            id=uuid.uuid4().hex[:8],
            name=label,
            agent=agent,
            cwd=workspace.folder,
            model=catalog.agents[agent].model or "",
            created_at=clock_wall,
            **workspace_fields(workspace),
        )
        registry.save((*snapshot.sessions, record), clock_wall)
    finally:
        lock.release()
    where = f" on {workspace.branch}" if workspace.branch else ""
    print(f"{record.id}\t{workspace.folder}{where}")
    return EXIT_OK


def find_session(settings: Settings, key: str) -> SessionRecord:
    """A saved session by id, or by name when exactly one has it."""
    sessions = Registry(Path(settings.state_dir)).load(repair=False).sessions
    by_id = [r for r in sessions if r.id == key]
    if by_id:
        return by_id[0]
    by_name = [r for r in sessions if r.name == key]
    if len(by_name) == 1:
        return by_name[0]
    if by_name:
        raise WorkspaceError(f"{len(by_name)} sessions are named {key!r}: use the id (`polypilot status`)")
    raise WorkspaceError(f"no session {key!r} (see `polypilot status`)")


def _workspace(settings: Settings, key: str) -> tuple[SessionRecord, Workspace]:
    record = find_session(settings, key)
    workspace = workspace_of(record)
    if workspace is None or not workspace.is_git:
        raise WorkspaceError(f"the session {record.name!r} does not work in a git repository")
    return record, workspace


async def cmd_diff(settings: Settings, key: str, *, stat: bool) -> int:
    """Print the session's changes against its base: the diff, or a line per file."""
    try:
        _, workspace = _workspace(settings, key)
        if stat:
            counts = await file_counts(workspace)
            for count in counts:
                tag = " (binary)" if count.binary else " (new)" if count.untracked else ""
                print(f"+{count.added}\t\u2212{count.removed}\t{count.path}{tag}")
            total = totals(counts)
            print(total.short() if total else "no changes")
            return EXIT_OK
        diff = await diff_text(workspace)
    except WorkspaceError as exc:
        return _fail(str(exc))
    sys.stdout.write(diff.text)
    if diff.truncated:
        return _fail("the diff was cut: it is larger than the limit")
    return EXIT_OK


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
            text = message or await finish.draft_commit_message(workspace, record.name, record.last_prompt)
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
            print(await finish.open_pull_request(workspace, record.name, message or ""))
        elif action == "discard":
            print(await finish.discard(workspace, force=force))
        else:
            return _fail(f"unknown action {action!r}", EXIT_USAGE)
    except WorkspaceError as exc:
        hint = " (--force throws it away)" if action == "discard" and "nothing was removed" in str(exc) else ""
        return _fail(f"{exc}{hint}")
    return EXIT_OK
