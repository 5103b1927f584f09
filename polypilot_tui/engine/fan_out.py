"""Many sessions at once: broadcast, fan-out into worktrees, compare, check, pick.

A broadcast sends one prompt to each session named through the engine's own ``send`` (a busy
session queues it); each turn is its own, watched by the watchdog like any other, and one
session's refusal is told beside the others' results. A fan-out makes a session per attempt,
each in a new worktree from the same base (the engine's ``new_session``), sends each the task,
and keeps the group (engine/fan_out_groups.py): how each attempt's task turn ended and when,
and its check's result. The check runs when an attempt's turn ends, or when asked. A pick
merges one attempt through the engine's own ``commit`` and ``merge`` and, asked, discards the
others through its ``discard``, which refuses and names work at risk unless forced.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import replace
from pathlib import Path

from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.fan_out import (
    MAX_ATTEMPTS,
    MAX_BROADCAST,
    MAX_CHECK_CHARS,
    Attempt,
    AttemptRecord,
    BroadcastResult,
    CheckResult,
    Comparison,
    Discarded,
    Group,
)
from polypilot_tui.domain.limits import PROMPT_BYTES, SESSIONS, size_words
from polypilot_tui.domain.records import Record, TurnEnded
from polypilot_tui.domain.turn import EndCause, Outcome
from polypilot_tui.domain.usage import Usage
from polypilot_tui.domain.workspace import Isolation
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import BadRequest, Engine, EngineError, UnknownGroup
from polypilot_tui.engine.debounced import SnapshotWriter
from polypilot_tui.engine.fan_out_groups import GroupsFile, line_of
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.verbs import (
    Broadcast,
    Commit,
    Discard,
    FanOut,
    FolderRef,
    GroupRef,
    Merge,
    NewSession,
    Pick,
    PickResult,
    Send,
    SessionRef,
)
from polypilot_tui.infra.event_loop import cancel_and_wait
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.storage.notices import NoticeBoard
from polypilot_tui.workspace.check_command import run_check

log = logging.getLogger(__name__)

RESENT = frozenset({EndCause.QUIT.value, EndCause.LOST_IN_RESTART.value})
"""Ends the app's own stop caused: the attempt's prompt may be resent, and its turn end counts then."""

MAX_CHECK_TIMEOUT = 3600.0
CHECKS_AT_ONCE = 3
"""Checks running at once (a project's test suite each): the others wait their turn."""


class FanOutDesk:
    """The many-sessions verbs' work, through the engine's own verbs."""

    def __init__(self, engine: Engine, manager: SessionManager, notices: NoticeBoard) -> None:
        self._engine = engine
        self._manager = manager
        self._notices = notices
        self._groups: dict[str, Group] = {}
        self._slots = asyncio.Semaphore(CHECKS_AT_ONCE)
        self._checks: dict[str, asyncio.Task[CheckResult]] = {}
        """The check running in an attempt's worktree, by session id."""
        self._closing = False
        self._lines: dict[str, tuple[float, str]] = {}
        """Each group's line in the file, redacted when the group changed (not all at every change)."""
        self._writer: SnapshotWriter[list[tuple[float, str]]] | None = None
        engine.subscribe(self._on_turn_ended, TurnEnded)

    # ---- keeping groups -----------------------------------------------------------------
    def restore(self, state_dir: Path) -> None:
        """Read the groups kept in ``state_dir`` (those with a session left) and keep them saved there."""
        groups_file = GroupsFile(state_dir)
        self._writer = SnapshotWriter(
            self._manager.clock,
            lambda: list(self._lines.values()),
            groups_file.save_lines,
            self._notices,
            "fan-out-save",
            "The fan-out groups",
            groups_file.path,
        )
        groups, problems = groups_file.load()
        for problem in problems:
            self._notices.tell(f"fan-out-load:{problem}", problem, "warning")
        ids = set(self._engine.ids())
        for group in groups:
            if any(a.session_id in ids for a in group.attempts):
                self._groups[group.group] = group
                self._lines[group.group] = (group.created_wall, line_of(group))  # redacted when saved
                for attempt in group.attempts:
                    if attempt.session_id in ids:
                        self._manager.set_attempt_of(attempt.session_id, group.group)

    def _keep(self, group: Group) -> None:
        """Keep ``group``, and save the groups soon (off the loop: 200 groups of checks' output are
        megabytes), each group redacted when it changes, not all of them at every change."""
        self._groups[group.group] = group
        if self._writer is None:
            return
        self._lines[group.group] = (group.created_wall, line_of(REDACTOR.scrub(group)))  # a check may print a key
        self._writer.changed()

    async def saved(self) -> None:
        """The last change is on disk (or its failure told)."""
        if self._writer is not None:
            await self._writer.flush()

    def group(self, group_id: str) -> Group:
        group = self._groups.get(group_id)
        if group is None:
            raise UnknownGroup(f"no fan-out {group_id!r}")
        return group

    def discarded(self, session_id: str) -> None:
        """A session's worktree was discarded (by a pick, Finish or ``finish discard``): when it
        is an attempt, the compare says so, and its check is not run again."""
        for group in list(self._groups.values()):
            if group.attempt(session_id) is not None:
                self._update(group.group, session_id, discarded=True)

    def _update(self, group_id: str, session_id: str, **changes: object) -> None:
        group = self._groups.get(group_id)
        if group is None:
            return
        attempts = tuple(replace(a, **changes) if a.session_id == session_id else a for a in group.attempts)  # type: ignore[arg-type]
        self._keep(replace(group, attempts=attempts))

    # ---- broadcast ---------------------------------------------------------------------
    async def broadcast(self, request: Broadcast) -> tuple[BroadcastResult, ...]:
        ids = tuple(dict.fromkeys(request.session_ids))
        if not ids:
            raise BadRequest("name the sessions to send the prompt to")
        if len(ids) > MAX_BROADCAST:
            raise BadRequest(f"{len(ids)} sessions named; one broadcast reaches at most {MAX_BROADCAST}")
        if not request.prompt.strip():
            raise BadRequest("the prompt is empty: nothing was sent")
        # At once: a send waits for its agent to connect (seconds for some), not for the turn.
        return tuple(await asyncio.gather(*(self._send(sid, request.prompt) for sid in ids)))

    async def _send(self, session_id: str, prompt: str) -> BroadcastResult:
        """The prompt sent to one session, or refused with the reason (never raised: one
        session's refusal is its own, the others still get the prompt)."""
        try:
            result = await self._engine.call(verbs.SEND, Send(session_id, prompt))
        except (EngineError, ValueError) as exc:
            return BroadcastResult(session_id, "refused", str(exc))
        except Exception as exc:  # an agent that could not start, say: said, not raised
            log.exception("broadcast to %s", session_id)
            return BroadcastResult(session_id, "refused", f"{type(exc).__name__}: {exc}")
        return BroadcastResult(session_id, result)

    # ---- fan-out -----------------------------------------------------------------------
    async def fan_out(self, request: FanOut) -> str:
        """Check everything first (nothing is made when one attempt cannot be), then make the
        worktrees and sessions (undone when one fails), keep the group, send the task."""
        engine = self._engine
        if not request.task.strip():
            raise BadRequest("the task is empty: nothing was made")
        if len(request.task.encode("utf-8", "surrogatepass")) > PROMPT_BYTES:
            raise BadRequest(
                f"the task holds more than {size_words(PROMPT_BYTES)}, the most a prompt may; nothing was made"
            )
        if not 1 <= len(request.agents) <= MAX_ATTEMPTS:
            raise BadRequest(f"name 1 to {MAX_ATTEMPTS} attempts (an agent per attempt); nothing was made")
        if len(request.check) > MAX_CHECK_CHARS or "\0" in request.check:
            raise BadRequest(f"the check command may have at most {MAX_CHECK_CHARS} characters, no NUL")
        if not 0 < request.check_timeout <= MAX_CHECK_TIMEOUT:
            raise BadRequest(f"the check's timeout is more than 0 and at most {MAX_CHECK_TIMEOUT:g} seconds")
        if len(engine.ids()) + len(request.agents) > SESSIONS:
            raise EngineError(
                f"{len(request.agents)} more sessions would be over the {SESSIONS} the engine holds at most; "
                "close some first (nothing was made)"
            )
        if not request.folder:
            raise BadRequest("name the repository's folder: each attempt works in a new worktree of it")
        info = await engine.call(verbs.INSPECT_FOLDER, FolderRef(request.folder))
        if not info.is_git:
            raise EngineError(f"{info.folder} is not in a git repository: a fan-out makes a worktree per attempt there")
        group_id = uuid.uuid4().hex[:8]
        asks = [
            NewSession(
                agent,
                f"{agent}-{group_id}-{n}",
                request.folder,
                Isolation.WORKTREE,
                base=request.base,
                sandbox=request.sandbox,
            )
            for n, agent in enumerate(request.agents, 1)
        ]
        for ask in asks:
            await engine.call(verbs.CHECK_NEW_SESSION, ask)
        made: list[str] = []
        try:
            for ask in asks:
                made.append(await engine.call(verbs.NEW_SESSION, ask))
        except BaseException:
            await self._unmake(made)
            raise
        base = next((v.workspace.base for v in map(engine.view, made) if v.workspace is not None), "")
        group = Group(
            group_id,
            request.task,
            request.check.strip(),
            info.repo,
            base,
            engine.clock.wall(),
            tuple(AttemptRecord(sid, ask.agent) for sid, ask in zip(made, asks, strict=True)),
            request.check_timeout,
        )
        self._keep(group)
        for sid in made:
            self._manager.set_attempt_of(sid, group_id)
        for sid in made:
            self._update(group_id, sid, started_wall=engine.clock.wall())
        sent = await asyncio.gather(*(self._send(sid, request.task) for sid in made))
        for result in sent:  # this attempt failed; the others go on
            if result.result == "refused":
                self._update(
                    group_id,
                    result.session_id,
                    ended_wall=engine.clock.wall(),
                    outcome=Outcome.FAILED.value,
                    reason=result.reason,
                    cause=EndCause.SEND_FAILED.value,
                )
        return group_id

    async def _unmake(self, made: list[str]) -> None:
        """Remove what a fan-out made before one of its attempts failed (new: nothing at risk)."""
        for sid in made:
            try:
                await self._engine.call(verbs.DISCARD, Discard(sid, force=True))
            except EngineError as exc:
                log.warning("a fan-out's worktree was not removed: %s", exc)
            await self._manager.close(sid)

    def _on_turn_ended(self, change: Record) -> None:
        """An attempt's task turn ended: keep how and when; run its check."""
        assert isinstance(change, TurnEnded)
        if change.record.outcome is Outcome.RECOVERED:  # resent after a recovery: the turn goes on
            return
        for group in list(self._groups.values()):
            attempt = group.attempt(change.session_id)
            if attempt is None or not attempt.started_wall or (attempt.outcome and attempt.cause not in RESENT):
                continue
            cause = change.record.cause.value
            self._update(
                group.group,
                attempt.session_id,
                ended_wall=self._engine.clock.wall(),
                outcome=change.record.outcome.value,
                reason=change.record.reason,
                cause=cause,
                refused=change.record.refused,
            )
            if group.check and cause not in RESENT and not self._closing:
                self._start_check(group.group, attempt.session_id)

    # ---- the check -------------------------------------------------------------------
    def _start_check(self, group_id: str, session_id: str) -> asyncio.Task[CheckResult] | None:
        """The check of that attempt, started unless it runs already; None when it cannot run."""
        running = self._checks.get(session_id)
        if running is not None:
            return running
        group = self._groups[group_id]
        attempt = group.attempt(session_id)
        if attempt is None or attempt.discarded or session_id not in self._engine.ids():
            return None
        view = self._engine.view(session_id)
        if view.workspace is None or view.workspace_problem:  # said, not skipped silently
            why = view.workspace_problem or "the attempt has no folder"
            self._update(group_id, session_id, check=CheckResult(None, "", 0.0, error=why))
            return None
        folder = view.workspace.folder
        task = asyncio.get_running_loop().create_task(self._check(group_id, session_id, folder))
        self._checks[session_id] = task
        task.add_done_callback(lambda _: self._checks.pop(session_id, None))
        return task

    async def _check(self, group_id: str, session_id: str, folder: str) -> CheckResult:
        """One check, when a slot is free (its timeout counts from its start), kept in its
        group before the task ends: whoever awaits the task finds it there."""
        group = self._groups[group_id]
        async with self._slots:
            result = await run_check(group.check, folder, group.check_timeout)
        self._update(group_id, session_id, check=REDACTOR.scrub(result))
        return result

    async def run_check(self, request: GroupRef) -> Comparison:
        group = self.group(request.group)
        if not group.check:
            raise EngineError("this fan-out has no check command")
        tasks = [t for a in group.attempts if (t := self._start_check(group.group, a.session_id)) is not None]
        if tasks:
            await asyncio.wait(tasks)
        return await self.compare(request)

    async def idle(self) -> None:
        """Every check running now has ended (tests, and a headless run before it reads)."""
        while self._checks:
            await asyncio.wait(list(self._checks.values()))
            await asyncio.sleep(0)

    # ---- compare -----------------------------------------------------------------------
    async def compare(self, request: GroupRef) -> Comparison:
        group = self.group(request.group)
        now = self._engine.clock.wall()
        attempts = [await self._attempt(group, a, now) for a in group.attempts]
        return Comparison(group.group, group.task, group.check, tuple(attempts), group.base, group.repo, group.picked)

    async def _attempt(self, group: Group, kept: AttemptRecord, now: float) -> Attempt:
        sid = kept.session_id
        end = kept.ended_wall if kept.ended_wall is not None else now
        seconds = round(max(0.0, end - kept.started_wall), 3) if kept.started_wall else 0.0
        if sid not in self._engine.ids():
            return Attempt(
                sid, "", kept.agent, "closed", kept.outcome, seconds, Usage(), ChangeStats(), kept.check, kept.reason
            )
        view = self._engine.view(sid)
        changes = view.changes
        try:  # counted now, as the diff view counts them
            changes = (await self._engine.call(verbs.DIFF_STAT, SessionRef(sid))).total
        except EngineError:
            pass  # its worktree is gone: the last count stands (its problem is in the view)
        return Attempt(
            sid,
            view.name,
            view.agent,
            view.status.value,
            kept.outcome,
            seconds,
            view.usage,
            changes,
            kept.check,
            kept.reason,
            view.branch,
            view.workspace.folder if view.workspace else "",
            sid in self._checks,
            kept.discarded,
            kept.refused,
        )

    # ---- pick --------------------------------------------------------------------------
    async def pick(self, request: Pick) -> PickResult:
        engine = self._engine
        group = self.group(request.group)
        if group.attempt(request.session_id) is None:
            raise EngineError(f"{request.session_id!r} is not an attempt of fan-out {group.group}")
        sid = (await engine.call(verbs.SESSION_VIEW, SessionRef(request.session_id))).id
        if engine.view(sid).status.busy:
            raise EngineError("that attempt is still working: wait for its turn to end, or stop it, then pick it")
        committed = ""
        state = await engine.call(verbs.FINISH_STATE, SessionRef(sid))
        if state.worktree.uncommitted:
            message = request.message.strip() or await engine.call(verbs.COMMIT_MESSAGE, SessionRef(sid))
            committed = await engine.call(verbs.COMMIT, Commit(sid, message))
        merged = await engine.call(verbs.MERGE, Merge(sid))
        if merged.merged:
            self._keep(replace(group, picked=sid))
        discarded: list[Discarded] = []
        if merged.merged and request.discard_others:
            for other in group.attempts:
                if other.session_id != sid and not other.discarded and other.session_id in engine.ids():
                    discarded.append(await self._discard(other.session_id, request.force))
        return PickResult(group.group, sid, merged, committed, tuple(discarded))

    async def _discard(self, session_id: str, force: bool) -> Discarded:
        """One other attempt discarded (its turn stopped first), or refused naming its work at risk."""
        engine = self._engine
        if engine.view(session_id).status.busy:
            await self._manager.stop(session_id)
        try:
            return Discarded(session_id, True, await engine.call(verbs.DISCARD, Discard(session_id, force)))
        except EngineError as exc:
            return Discarded(session_id, False, str(exc))

    async def close(self) -> None:
        """Stop the checks running (a turn the close interrupts starts none); the groups saved."""
        self._closing = True
        await cancel_and_wait(self._checks.values())
        await self.saved()
