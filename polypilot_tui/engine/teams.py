"""Teams: an orchestrator session, the workers it starts, one budget, and waits that survive a restart.

:class:`TeamDesk` is owned by the :class:`~polypilot_tui.engine.local.LocalEngine` and answers
the team verbs (engine/verbs.py). Making a session an orchestrator issues a capability (a
secret, taught to the redactor): the relay its agent starts (:meth:`TeamDesk.tool_servers`)
presents it with every tool call, and it names the orchestration and the session, so a
worker's capability acts for that worker's own workers only, never for its orchestrator's.

A worker is a session like any other: its turns are watched by the watchdog, its permission
requests go to the human (the orchestrator sees it "blocked", nothing is answered for it), and
"done" is the engine's own turn end (:class:`~polypilot_tui.domain.records.TurnEnded`), never
text. The budget and the queue are the domain's (:mod:`polypilot_tui.domain.team`); the desk
does what it says: starts, queues, stops, refuses naming the bound.

Durable: every team is saved, one per line, in ``teams.jsonl`` beside ``sessions.json`` (a
damaged line loses that team alone, and is told). A wait still pending when the engine stopped
cannot be answered to the relay that died with it: it is delivered as a prompt to the waiter
when its workers end (at once if they already have), queued behind a running turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import sys
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Protocol

from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import TimerHandle, within
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.limits import (
    QUEUE_BYTES,
    QUEUE_PROMPTS,
    LimitExceeded,
    check_prompt,
    saved_bytes,
    size_words,
)
from polypilot_tui.domain.records import Record, SessionRemoved, TurnEnded, ViewChanged
from polypilot_tui.domain.safe_json import dump_json, load_json
from polypilot_tui.domain.team import WAIT_UNTIL, Link, Pending, Refusal, Team, Wait, reached, team_from_json
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.tool_servers import ToolServer, relay_server
from polypilot_tui.domain.workspace import Isolation
from polypilot_tui.engine.api import BadRequest, EngineError, UnknownCapability
from polypilot_tui.engine.debounced import SnapshotWriter
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.read_ahead import read_in
from polypilot_tui.engine.verbs import (
    MAX_WAIT_SECONDS,
    NewSession,
    Orchestrate,
    SessionRef,
    StartWorker,
    TeamCall,
    TeamState,
    WaitWorkers,
    WorkerPrompt,
    WorkerRef,
    WorkerReply,
    WorkerState,
)
from polypilot_tui.infra.event_loop import cancel_and_wait
from polypilot_tui.infra.lines import bounded_lines
from polypilot_tui.infra.private import atomic_write, move_aside, open_private
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.storage.notices import NoticeBoard

log = logging.getLogger(__name__)

TEAMS_FILE = "teams.jsonl"
"""Beside sessions.json: one team a line."""
MAX_TEAM_BYTES = 4 * QUEUE_BYTES
"""One team's line at most (its queue holds at most QUEUE_BYTES of prompts): a longer one is lost alone."""
STOPPING = (
    "the engine is stopping: this wait is kept, and answered by a prompt to you once it runs again "
    "and your workers have ended"
)
NOT_SERVED = (
    "a team needs the engine service: its agents call the engine on its socket, and this engine runs "
    "inside its dashboard (--in-process) or `run` (start the dashboard without --in-process)"
)
FIRST_LINE_CHARS = 200
"""Of a worker's reply, in a wait delivered after a restart."""


class Host(Protocol):
    """What the desk asks of its engine (the LocalEngine)."""

    @property
    def manager(self) -> SessionManager: ...

    @property
    def notices(self) -> NoticeBoard: ...

    def known(self, session_id: str) -> str: ...

    async def new_session(self, request: NewSession) -> str: ...

    async def check_new_session(self, request: NewSession) -> None: ...


@dataclass(frozen=True)
class Grant:
    """What a capability lets its holder act as: a session of a team."""

    team: str
    """The team's orchestrator."""
    session: str


class TeamDesk:
    """Every team of the engine: their workers, budgets, queues, capabilities and waits."""

    def __init__(self, engine: Host) -> None:
        self._engine = engine
        self._manager = engine.manager
        self._clock = engine.manager.clock
        self._teams: dict[str, Team] = {}
        """By orchestrator."""
        self._team_of: dict[str, str] = {}
        """Every member (orchestrator and workers) to its team's orchestrator."""
        self._grants: dict[str, Grant] = {}
        self._capability: dict[str, str] = {}
        """A session's capability."""
        self._timers: dict[str, TimerHandle] = {}
        self._changed = asyncio.Event()
        self._waiting: set[str] = set()
        """Waits a relay is waiting on now (the others are delivered as prompts)."""
        self._background: set[asyncio.Task[object]] = set()
        self._path: Path | None = None
        self._writer: SnapshotWriter[bytes] | None = None
        self._closing = False
        self.socket: Path | None = None
        """The engine's socket (set where it is served): the relays' way back."""
        self._unsubscribe = self._manager.subscribe(self._on_record, TurnEnded, ViewChanged, SessionRemoved)

    # ---- the relay ---------------------------------------------------------------------
    def tool_servers(self, session_id: str) -> tuple[ToolServer, ...]:
        """The relay for a session that may start workers (an orchestrator, a worker whose depth
        allows), with its capability; none for another session or an engine not served."""
        capability = self._capability.get(session_id)
        if capability is None or self.socket is None:
            return ()
        log_file = self._manager.workdir(session_id) / "relay.log"  # the session's own folder: 0700
        return (relay_server(sys.executable, str(self.socket), capability, str(log_file)),)

    def _issue(self, team: str, session_id: str) -> str:
        capability = secrets.token_urlsafe(32)
        REDACTOR.learn([capability])  # no log, transcript or recording holds it
        self._grants[capability] = Grant(team, session_id)
        self._capability[session_id] = capability
        return capability

    def _grant(self, capability: str) -> tuple[Team, Grant]:
        grant = self._grants.get(capability) if isinstance(capability, str) else None
        team = self._teams.get(grant.team) if grant is not None else None
        if grant is None or team is None or grant.session not in self._manager.ids():
            raise UnknownCapability("unknown capability")
        return team, grant

    # ---- the verbs of the engine ----------------------------------------------------------
    async def orchestrate(self, request: Orchestrate) -> TeamState:
        sid = self._engine.known(request.session_id)
        problem = request.bounds.problem()
        if problem:
            raise BadRequest(problem)
        if self.socket is None:  # its agent's tools would reach nothing: never a team without them
            raise EngineError(NOT_SERVED)
        if self._manager.view(sid).sandbox.on:  # its relay runs in its sandbox, which hides the socket
            raise EngineError(
                f"{self._name(sid)} runs sandboxed, and an orchestrator cannot: its team tools talk to the "
                "engine's socket, which the sandbox hides from its agent. Lead the team from a session "
                "without a sandbox (its workers can be sandboxed)"
            )
        lead = self._team_of.get(sid)
        if lead is not None and lead != sid:
            raise EngineError(f"{self._name(sid)} is a worker of {self._name(lead)}'s team: it cannot lead one")
        team = self._teams.get(sid)
        if team is None:
            team = Team(sid, request.bounds, self._clock.now())
            team.baseline = team.orchestrator_usage = self._manager.view(sid).usage
            self._teams[sid] = team
            self._team_of[sid] = sid
            self._issue(sid, sid)
        else:  # the human raised the bounds or lifted the stop
            team.bounds, team.stopped, team.note = request.bounds, "", ""
            team.dispatches.clear()
        self._arm_wall(team)
        self._show_note(team)
        self._save()
        if self._manager.session(sid).connected and not self._manager.view(sid).status.busy:
            self._spawn(self._hand_relay(sid))
        self._drain(team)
        return self.state(team)

    async def _hand_relay(self, sid: str) -> None:
        """Reconnect an idle orchestrator's agent: the relay is handed at a connect."""
        try:
            await self._manager.reconnect(sid)
        except Exception as exc:  # noqa: BLE001 - the session says why; the team stands, its next connect hands it
            log.warning("the orchestrator %s was not reconnected to hand it its tools: %s", sid, exc)

    async def team_state(self, request: SessionRef) -> TeamState:
        sid = self._engine.known(request.session_id)
        lead = self._team_of.get(sid)
        if lead is None:
            raise EngineError(f"{self._name(sid)} leads no team and works in none")
        return self.state(self._teams[lead])

    async def stop_workers(self, request: SessionRef) -> int:
        sid = self._engine.known(request.session_id)
        team = self._teams.get(self._team_of.get(sid, ""))
        if team is None:
            raise EngineError(f"{self._name(sid)} leads no team")
        links = [link for link in self._below(team, sid) if not link.ended]
        for link in links:  # the queued first: a slot freed by a stop must not start one of them
            if not link.holds_slot:
                team.stopped_worker(link.worker, "stopped by you", self._now())
        await asyncio.gather(*(self._stop_link(team, link, "stopped by you") for link in links if link.holds_slot))
        self._settle(team)
        return len(links)

    # ---- the relay's tools ----------------------------------------------------------------
    async def team_workers(self, request: TeamCall) -> tuple[WorkerState, ...]:
        team, grant = self._grant(request.capability)
        return tuple(self._worker_state(link) for link in team.workers_of(grant.session))

    async def team_start(self, request: StartWorker) -> WorkerState:
        team, grant = self._grant(request.capability)
        if not request.prompt.strip():
            raise BadRequest("a worker needs a prompt")
        self._check_room(team, request.prompt, queued=not (team.has_slot() and not team.queue))
        await self._engine.check_new_session(self._worker_session(team, grant, request, 1))  # nothing made
        self._refuse(team, team.refuse_dispatch(grant.session, request.agent, request.prompt, self._now(), new=True))
        team.reserved += 1  # a start called meanwhile (agents call tools in parallel) counts this one
        try:
            sid = await self._engine.new_session(self._worker_session(team, grant, request, 0))
        finally:
            team.reserved -= 1
        depth = team.depth_of(grant.session) + 1
        link = Link(sid, grant.session, depth, self._manager.view(sid).name, request.agent)
        team.links[sid] = link
        self._team_of[sid] = team.orchestrator
        if depth < team.bounds.depth:  # it may orchestrate in turn: its relay, before it connects
            self._issue(team.orchestrator, sid)
        self._manager.set_team(sid, grant.session, False, "")
        await self._dispatch(team, link, request.prompt)
        return self._worker_state(link)

    async def team_send(self, request: WorkerPrompt) -> WorkerState:
        team, grant = self._grant(request.capability)
        link = self._caller_worker(team, grant, request.worker)
        if not request.prompt.strip():
            raise BadRequest("an empty prompt")
        self._check_room(team, request.prompt, queued=not (link.holds_slot or (team.has_slot() and not team.queue)))
        self._refuse(team, team.refuse_dispatch(grant.session, link.agent, request.prompt, self._now(), new=False))
        await self._dispatch(team, link, request.prompt)
        return self._worker_state(link)

    async def team_wait(self, request: WaitWorkers) -> tuple[WorkerState, ...]:
        team, grant = self._grant(request.capability)
        if request.until not in WAIT_UNTIL:
            raise BadRequest(f"until must be done, blocked or any (got {request.until!r})")
        if not 0 <= request.timeout_seconds <= MAX_WAIT_SECONDS:
            raise BadRequest(f"timeout_seconds must be from 0 to {MAX_WAIT_SECONDS:.0f}")
        ids = request.workers or tuple(link.worker for link in team.workers_of(grant.session))
        links = [self._caller_worker(team, grant, worker) for worker in dict.fromkeys(ids)]
        wait = Wait(uuid.uuid4().hex, grant.session, tuple(link.worker for link in links), request.until)
        deadline = self._now() + request.timeout_seconds
        team.waits[wait.key] = wait
        self._waiting.add(wait.key)
        self._save()
        try:
            while True:
                if self._closing:  # its agent stops with the engine: the answer goes to the next one
                    raise EngineError(STOPPING)
                if reached(links, request.until) or self._now() >= deadline:
                    break
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await within(self._clock, self._changed.wait(), deadline - self._now())
        finally:
            self._waiting.discard(wait.key)
            if not self._closing:  # else it is kept: delivered as a prompt after the restart
                team.waits.pop(wait.key, None)
                self._save()
        return tuple(self._worker_state(link) for link in links)

    async def team_read(self, request: WorkerRef) -> WorkerReply:
        team, grant = self._grant(request.capability)
        link = self._caller_worker(team, grant, request.worker)
        return WorkerReply(link.worker, await self._last_reply(link.worker), link.outcome, link.reason)

    async def team_stop(self, request: WorkerRef) -> WorkerState:
        team, grant = self._grant(request.capability)
        link = self._caller_worker(team, grant, request.worker)
        await self._stop_link(team, link, f"stopped by {self._name(grant.session)}")
        self._settle(team)
        return self._worker_state(link)

    def _worker_session(self, team: Team, grant: Grant, request: StartWorker, ahead: int) -> NewSession:
        """The new session of a worker: in its starter's folder, or a worktree of its repository
        from its branch, in its starter's sandbox if it has one; named after the team and its
        place in it (parallel starts make worktrees at once: their branches must differ), unless
        the starter named it."""
        starter = self._manager.view(grant.session)
        workspace = starter.workspace
        folder = (workspace.folder if workspace else "") or starter.cwd or None
        base = ""
        if request.worktree and workspace is not None and workspace.repo:
            folder, base = workspace.repo, workspace.branch
        number = len(team.links) + team.reserved + ahead
        name = request.name or f"{request.agent} {number} of {self._name(team.orchestrator)}"
        isolation = Isolation.WORKTREE if request.worktree else Isolation.FOLDER
        # At least as sandboxed as its starter (never widened by an orchestrator); from a starter
        # without one, the agent's own (its agents-file entry's).
        sandbox = starter.sandbox if starter.sandbox.on else None
        return NewSession(request.agent, name, folder, isolation, base=base, sandbox=sandbox)

    # ---- reads -------------------------------------------------------------------------
    def _worker_state(self, link: Link) -> WorkerState:
        """A worker as its orchestrator reads it: how long it has worked, and while blocked, on what."""
        seconds = None
        if link.started_at is not None:
            until = link.ended_at if link.ended_at is not None else self._now()
            seconds = round(max(0.0, until - link.started_at), 1)
        waiting_on = ""
        if link.state == "blocked" and link.worker in self._manager.ids():
            asking = self._manager.view(link.worker).pending_permission
            waiting_on = REDACTOR.text(asking.title) if asking is not None else ""
        return WorkerState(
            link.worker,
            link.name,
            link.agent,
            link.state,
            link.outcome,
            link.reason,
            link.turns,
            link.started_at,
            link.ended_at,
            seconds,
            waiting_on,
        )

    def state(self, team: Team) -> TeamState:
        return TeamState(
            orchestrator=team.orchestrator,
            bounds=team.bounds,
            workers=tuple(self._worker_state(link) for link in team.links.values()),
            running=team.running(),
            queued=len(team.queue),
            turns=team.turns,
            seconds=team.elapsed(self._now()),
            tokens=team.tokens(),
            cost=team.cost(),
            pending_waits=len(team.waits),
            stopped=team.stopped,
            note=team.note,
        )

    def _caller_worker(self, team: Team, grant: Grant, worker: str) -> Link:
        link = team.links.get(worker)
        if link is None or link.parent != grant.session:
            raise EngineError(f"no worker {worker!r} of yours (list_workers names them)")
        if worker not in self._manager.ids():
            raise EngineError(f"worker {worker!r} was closed")
        return link

    def _below(self, team: Team, session_id: str) -> list[Link]:
        """Every worker under ``session_id`` in the tree (its workers, theirs…)."""
        found: list[Link] = []
        parents = {session_id}
        for link in team.links.values():  # links are kept in start order: a parent before its workers
            if link.parent in parents:
                found.append(link)
                parents.add(link.worker)
        return found

    async def _last_reply(self, session_id: str) -> str:
        """The assistant rows after the last prompt, whole."""
        items = self._manager.history(session_id)
        if not await read_in(items):
            raise EngineError("the worker's saved chat rows cannot be read now; ask again later")
        rows = list(items)
        start = next((i + 1 for i in range(len(rows) - 1, -1, -1) if rows[i].kind is ItemKind.USER), 0)
        # Redacted: it leaves the user's screen for another agent (and its model provider).
        return REDACTOR.text("\n\n".join(row.text for row in rows[start:] if row.kind is ItemKind.ASSISTANT))

    # ---- doing what the team says ------------------------------------------------------------
    def _check_room(self, team: Team, prompt: str, queued: bool) -> None:
        """BadRequest naming the limit when ``prompt`` is too big to keep, or (``queued``) the
        team's queue holds as much as one session's may (domain/limits.py)."""
        try:
            size = check_prompt(prompt)
        except LimitExceeded as exc:
            raise BadRequest(str(exc)) from None
        if not queued:
            return
        held = sum(saved_bytes(p.prompt) for p in team.queue)
        if len(team.queue) >= QUEUE_PROMPTS or held + size > QUEUE_BYTES:
            raise BadRequest(
                f"the team's queue holds {len(team.queue)} prompts ({size_words(held)}); it may hold at most "
                f"{QUEUE_PROMPTS} or {size_words(QUEUE_BYTES)}: wait for a worker to end"
            )

    def _refuse(self, team: Team, refusal: Refusal | None) -> None:
        """Refuse the tool call naming the bound; a stall stops the orchestration."""
        if refusal is None:
            return
        if refusal.bound == "stalled":
            self._halt(team, refusal)
        elif refusal.bound != "stopped":
            team.note = refusal.words
            self._show_note(team)
            self._save()
        raise EngineError(f"refused: {refusal.words}")

    async def _dispatch(self, team: Team, link: Link, prompt: str) -> None:
        """Send now when ``link`` holds a slot or one is free, else queue (FIFO)."""
        if link.holds_slot or (team.has_slot() and not team.queue):
            await self._send(team, link, prompt)
        else:
            team.queue.append(Pending(link.worker, prompt))
            link.state = "queued"
            team.note = team.at_once_note()
            self._show_note(team)
        self._settle(team)

    async def _send(self, team: Team, link: Link, prompt: str) -> None:
        if not link.holds_slot:
            team.sent(link.worker, self._now())
        self._wake()
        try:
            await self._manager.send(link.worker, prompt)
        except (EngineError, ValueError) as exc:
            team.not_sent(link.worker, f"not sent: {exc}", self._now())
            self._settle(team)
            raise EngineError(f"the prompt was not sent to {link.name}: {exc}") from None

    def _drain(self, team: Team) -> None:
        """Start what waits for a slot, oldest first, while slots are free."""
        while (pending := team.next_pending()) is not None:
            link = team.links.get(pending.worker)
            if link is None or pending.worker not in self._manager.ids():
                continue
            team.sent(link.worker, self._now())
            self._spawn(self._send_queued(team, link, pending.prompt))
        if not team.queue and team.note.startswith("workers at once"):
            team.note = ""
        self._show_note(team)

    async def _send_queued(self, team: Team, link: Link, prompt: str) -> None:
        if not link.holds_slot:  # stopped while it waited for the loop
            return
        with contextlib.suppress(EngineError):  # told on the worker's state (failed, not sent)
            await self._send(team, link, prompt)

    async def _stop_link(self, team: Team, link: Link, reason: str) -> None:
        if link.worker in self._manager.ids() and self._manager.session(link.worker).turn is not None:
            link.stopping = reason  # its TurnEnded (aborted) says who stopped it, or the bound that did
            await self._manager.stop(link.worker)
        team.stopped_worker(link.worker, reason, self._now())
        self._wake()

    def _halt(self, team: Team, why: Refusal) -> None:
        """Stop the orchestration (a bound crossed, a stall): every running worker is stopped."""
        team.stop(why)
        for link in team.links.values():
            if link.holds_slot:
                self._spawn(self._stop_link(team, link, why.words))
        self._show_note(team)
        self._save()
        self._wake()

    def _settle(self, team: Team) -> None:
        """Something changed: bounds crossed stop the team, free slots start the queue, waits
        pending since a restart are delivered, the views and the file follow."""
        if not team.stopped:
            crossed = team.spent_bound(self._now())
            if crossed is not None:  # the tree spent it: running workers stop, the dashboard says which
                self._halt(team, crossed)
        self._drain(team)
        self._deliver(team)
        self._save()
        self._wake()

    def _deliver(self, team: Team) -> None:
        """Waits no relay waits on (pending at a restart) whose workers ended: the waiter is told
        by a prompt, queued behind its running turn."""
        for wait in list(team.waits.values()):
            if wait.key in self._waiting:
                continue
            links = [team.links[w] for w in wait.workers if w in team.links]
            if not reached(links, wait.until) or wait.waiter not in self._manager.ids():
                continue
            del team.waits[wait.key]
            self._spawn(self._tell_waiter(wait.waiter, links))

    async def _tell_waiter(self, waiter: str, links: list[Link]) -> None:
        lines = [
            "polypilot: the engine restarted while you waited for your workers; here is how they ended "
            "(read_reply gives a reply whole):"
        ]
        for link in links:
            gone = link.worker not in self._manager.ids()
            reply = "" if gone else (await self._last_reply(link.worker)).strip()
            first = one_line(reply.splitlines()[0], FIRST_LINE_CHARS) if reply else ""
            said = f" ({link.reason})" if link.reason else ""
            lines.append(f"- {link.name} ({link.worker}): {link.state}{said}" + (f" — {first}" if first else ""))
        try:
            await self._manager.send(waiter, "\n".join(lines))
        except (EngineError, ValueError) as exc:
            self._engine.notices.tell(f"team-wait-{waiter}", f"A wait of {self._name(waiter)} was not delivered: {exc}")

    # ---- what happens to the sessions --------------------------------------------------------
    def _on_record(self, change: Record) -> None:
        sid = change.session_id
        lead = self._team_of.get(sid)
        team = self._teams.get(lead) if lead is not None else None
        if team is None:
            return
        if self._closing:  # the quit ends the turns in flight: recorded, nothing more is started
            if isinstance(change, TurnEnded):
                team.turn_ended(sid, change.record.outcome.value, change.record.reason, self._now(), False)
            return
        if not isinstance(change, SessionRemoved) and sid not in self._manager.ids():
            return  # closed meanwhile: its SessionRemoved says so
        if isinstance(change, TurnEnded):
            session = self._manager.session(sid)
            more = bool(session.queue) and not session.queue_held
            self._usage(team, sid)
            team.turn_ended(sid, change.record.outcome.value, change.record.reason, self._now(), more)
            self._settle(team)
        elif isinstance(change, ViewChanged):
            if self._usage(team, sid):
                self._settle(team)
            link = team.links.get(sid)
            if link is not None:
                view = self._manager.view(sid)
                if team.blocked(sid, view.pending_permission is not None, view.status.busy):
                    self._save()
                    self._wake()
        elif isinstance(change, SessionRemoved) and sid in team.links:
            team.stopped_worker(sid, "its session was closed", self._now())
            self._settle(team)

    def _usage(self, team: Team, sid: str) -> bool:
        """The member's usage as it reports it now; True when it grew."""
        usage = self._manager.view(sid).usage
        if sid == team.orchestrator:
            grew, team.orchestrator_usage = usage != team.orchestrator_usage, usage
            return grew
        link = team.links.get(sid)
        if link is None or link.usage == usage:
            return False
        link.usage = usage
        return True

    def _arm_wall(self, team: Team) -> None:
        old = self._timers.pop(team.orchestrator, None)
        if old is not None:
            old.cancel()
        when = team.started_at + team.bounds.wall_seconds
        self._timers[team.orchestrator] = self._clock.call_at(when, lambda: self._settle(team))

    def _show_note(self, team: Team) -> None:
        if team.orchestrator in self._manager.ids():
            self._manager.set_team(team.orchestrator, "", True, team.note)

    def _wake(self) -> None:
        self._changed.set()

    def _spawn(self, coro: Awaitable[object]) -> None:
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[object]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a team task failed", exc_info=task.exception())

    def _now(self) -> float:
        return self._clock.now()

    def _name(self, sid: str) -> str:
        return self._manager.view(sid).name if sid in self._manager.ids() else sid

    # ---- saved, restored -----------------------------------------------------------------------
    def restore(self, state_dir: Path) -> None:
        """Read the saved teams (a damaged line loses its team, told), then keep them saved."""
        path = self._path = state_dir / TEAMS_FILE
        self._writer = SnapshotWriter(
            self._clock,
            self._snapshot,
            lambda data: atomic_write(path, data),
            self._engine.notices,
            "teams-save",
            "The teams",
            path,
        )
        now = self._now()
        try:
            lines = _team_lines(self._path)
        except FileNotFoundError:
            return
        except OSError as exc:
            moved = move_aside(self._path, str(exc))
            self._engine.notices.tell("teams-load", f"The saved teams could not be read ({exc}); moved to {moved}.")
            return
        damaged = False
        for number, (line, too_long) in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                if too_long:
                    raise ValueError(f"larger than {MAX_TEAM_BYTES:,} bytes")
                team = team_from_json(load_json(line, str(self._path), first_line=number), now)
            except ValueError as exc:
                damaged = True
                self._engine.notices.tell(
                    f"team-line-{number}",
                    f"Team {number} of {self._path} ({_leader(line)}) could not be read ({exc}): its links and "
                    "budget are lost, its sessions are kept.",
                    "warning",
                )
                continue
            self._adopt(team)
        if damaged:
            moved = move_aside(self._path, "a damaged team")
            log.warning("the teams file with damaged lines was kept as %s", moved)
        self._save()

    def _adopt(self, team: Team) -> None:
        ids = set(self._manager.ids())
        if team.orchestrator not in ids:
            return  # its orchestrator is gone: so is the team
        self._teams[team.orchestrator] = team
        self._team_of[team.orchestrator] = team.orchestrator
        self._issue(team.orchestrator, team.orchestrator)  # new secrets: the old relays died with the engine
        for link in team.links.values():
            if link.worker not in ids:
                team.stopped_worker(link.worker, "its session is gone", self._now())
                continue
            self._team_of[link.worker] = team.orchestrator
            link.usage = self._manager.view(link.worker).usage  # saved with the session, counted again
            if link.depth < team.bounds.depth:
                self._issue(team.orchestrator, link.worker)
            self._manager.set_team(link.worker, link.parent, False, "")
            session = self._manager.session(link.worker)
            if link.holds_slot and session.turn is None:  # its turn ended with the engine
                record = session.last_outcome
                outcome = record.outcome.value if record else "aborted"
                reason = record.reason if record else "the engine stopped"
                team.turn_ended(link.worker, outcome, reason, self._now(), more_queued=False)
        self._arm_wall(team)
        self._settle(team)

    def _save(self) -> None:
        if self._writer is not None:
            self._writer.changed()

    def _snapshot(self) -> bytes:
        now = self._now()
        # Redacted like sessions.json: a secret in a queued prompt or a reason reaches no file.
        lines = [dump_json(REDACTOR.scrub(team.to_json(now))) for team in self._teams.values()]
        return "".join(line + "\n" for line in lines).encode()

    def closing(self) -> None:
        """The engine is ending: waits are kept for the next start, nothing more is started;
        the turns its quit ends are still recorded."""
        self._closing = True
        for timer in self._timers.values():
            timer.cancel()
        self._wake()  # the waits a relay waits on now are answered: the engine stops

    async def close(self) -> None:
        """The engine has ended its turns: what is pending is saved as it is."""
        self.closing()
        self._unsubscribe()
        if self._writer is not None:
            self._writer.changed()  # the spent time is the close's
            await self._writer.flush()
            self._writer.stop()
        await cancel_and_wait(self._background)


def _team_lines(path: Path) -> list[tuple[str, bool]]:
    """The teams file's lines, opened the private way (never through a link), each with
    whether it was longer than :data:`MAX_TEAM_BYTES` (then only its start is kept)."""
    lines: list[tuple[str, bool]] = []
    with os.fdopen(open_private(path, os.O_RDONLY), "rb") as fh:
        for raw, too_long in bounded_lines(fh, MAX_TEAM_BYTES + 1):  # + 1: its newline
            if too_long:
                raw = raw[:200]  # enough to name its orchestrator, if it can be
            lines.append((raw.decode("utf-8", "replace"), too_long))
    return lines


def _leader(line: str) -> str:
    """The orchestrator a damaged line names, if it can still be read, for the notice."""
    try:
        obj = load_json(line, "")
    except ValueError:
        named = re.match(r'\{"orchestrator": "([^"\\]{1,64})"', line)  # a line cut short still names it
        return f"led by {named.group(1)}" if named else "not readable JSON"
    leader = obj.get("orchestrator") if isinstance(obj, dict) else None
    return f"led by {leader}" if isinstance(leader, str) else "no orchestrator named"
