"""Each session's change counts (files, +adds −dels), kept fresh without polling.

A count runs when a session appears (created or restored), when one of its turns ends (the
agent is done touching files) and when asked (a key in the dashboard); in an engine nobody
watches (``polypilot run``, which shows no count), only when asked. One count per session
at a time; a request during a count runs one more after it. git does the counting
(workspace/changes.py), so a big tree costs what ``git diff --numstat`` costs, only then.
"""

from __future__ import annotations

import asyncio
import logging
import os

from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.records import Record, SessionAdded, SessionRemoved, TurnEnded
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.infra.event_loop import cancel_and_wait
from polypilot_tui.workspace.changes import change_stats
from polypilot_tui.workspace.git import WorkspaceError
from polypilot_tui.workspace.worktrees import folder_problem

log = logging.getLogger(__name__)

PARALLEL_COUNTS = 3
"""Counts running at once: 200 sessions restored in git must not start 400 git processes."""


class ChangeCounter:
    """Subscribes to the engine; writes counts back with :meth:`SessionManager.set_changes`.
    ``automatic`` False: counts only when asked (a headless run in a big checkout would pay
    two full diffs of it, one while its agent boots and one as it exits, that it never shows)."""

    def __init__(self, manager: SessionManager, *, automatic: bool = True) -> None:
        self._manager = manager
        self._running: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._slots: asyncio.Semaphore | None = None  # made on the loop, at the first count
        self._cancelled: set[asyncio.Task[None]] = set()
        """Counts cut short (their session removed), until they have ended: close() waits for them."""
        self._closed = False
        watched = (SessionAdded, TurnEnded, SessionRemoved) if automatic else (SessionRemoved,)
        self._unsubscribe = manager.subscribe(self._on_change, *watched)

    def _on_change(self, change: Record) -> None:
        if isinstance(change, SessionRemoved):
            self._again.discard(change.session_id)
            task = self._running.pop(change.session_id, None)
            if task is not None:
                task.cancel()
                self._cancelled.add(task)  # out when it ends: a done callback runs even for a task
                task.add_done_callback(self._cancelled.discard)  # cancelled before its first step
            return
        self.refresh(change.session_id)

    def refresh(self, session_id: str) -> None:
        """Count the session's changes now (or right after the count in progress); nothing once
        closed (a commit's or a request's answer may come after: a count nobody waits for
        could hang the loop's end, see :meth:`close`)."""
        if self._closed:
            return
        try:
            workspace = self._manager.session(session_id).workspace
        except KeyError:
            return
        if workspace is None or not workspace.is_git:
            return
        if session_id in self._running:
            self._again.add(session_id)
            return
        task = asyncio.get_running_loop().create_task(self._count(session_id), name=f"count-{session_id}")
        self._running[session_id] = task

    def check_folders(self) -> None:
        """Recount the sessions whose folder vanished (deleted by hand): one ``stat`` each, so
        the heartbeat may call it; the count then says why the workspace cannot be read."""
        for sid in self._manager.ids():
            session = self._manager.session(sid)
            workspace = session.workspace
            gone = workspace is not None and workspace.is_git and not os.path.isdir(workspace.folder)
            if gone and not session.workspace_problem:
                self.refresh(sid)

    async def _count(self, session_id: str) -> None:
        try:
            while True:
                self._again.discard(session_id)
                await self._count_once(session_id)
                if session_id not in self._again:
                    return
        finally:
            if self._running.get(session_id) is asyncio.current_task():  # not a newer count's entry
                del self._running[session_id]

    async def _count_once(self, session_id: str) -> None:
        try:
            workspace = self._manager.session(session_id).workspace
        except KeyError:
            return
        if workspace is None:
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(PARALLEL_COUNTS)
        try:
            async with self._slots:
                problem = await folder_problem(workspace)
                stats = ChangeStats() if problem else await change_stats(workspace)
        except WorkspaceError as exc:
            problem, stats = str(exc), ChangeStats()
        except OSError as exc:  # git could not even start (a vanished folder as cwd, say)
            problem, stats = str(exc), ChangeStats()
        if problem:
            log.info("session %s: workspace not countable: %s", session_id, problem)
        if session_id in self._manager.ids():
            self._manager.set_changes(session_id, stats, problem)

    async def idle(self) -> None:
        """Wait for the counts in progress (tests, and a clean quit)."""
        while self._running or self._cancelled:
            await asyncio.gather(*self._running.values(), *self._cancelled, return_exceptions=True)

    async def close(self) -> None:
        """Stop listening; cancel the counts in progress and wait until they have ended. A count
        left to the event loop's own end could hang it for good: asyncio (3.11) cancels every
        task left there at once, and a git process being started when its pipes' task is
        cancelled too never reports its end."""
        self._closed = True
        self._unsubscribe()
        await cancel_and_wait([*self._running.values(), *self._cancelled])
        self._running.clear()
