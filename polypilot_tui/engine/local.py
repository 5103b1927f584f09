"""The engine in this process: a SessionManager with what runs beside it.

:class:`LocalEngine` is the :class:`~polypilot_tui.engine.api.Engine` a front end drives when
the engine runs in its own process — the engine service (``polypilot serve``) and the tests'
in-process dashboard. Beside the manager it owns persistence (restore, then saves), the
change counter (the sidebar's +adds −dels), the pruning of orphaned worktrees at start, and
the sessions closed moments ago (for an undo).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from polypilot_tui.agents.sandbox import sandbox_problem
from polypilot_tui.config import AgentConfig, Settings
from polypilot_tui.domain.agents import AgentOffer
from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.fan_out import BroadcastResult, Comparison
from polypilot_tui.domain.model_choice import ModelChoices
from polypilot_tui.domain.records import Record
from polypilot_tui.domain.sandbox import Sandbox, chosen
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.view import SessionDetails, SessionView
from polypilot_tui.domain.workspace import FolderInfo, MergeResult, Workspace
from polypilot_tui.engine.api import BadRequest, EngineError, OneMachine, UnknownSession, Verb
from polypilot_tui.engine.change_counter import ChangeCounter
from polypilot_tui.engine.fan_out import FanOutDesk
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.model_switch import ModelDesk
from polypilot_tui.engine.read_ahead import read_in
from polypilot_tui.engine.stream import Listener, Unsubscribe
from polypilot_tui.engine.teams import TeamDesk
from polypilot_tui.engine.verbs import (
    API_VERSION,
    HISTORY_PAGE,
    AnswerPermission,
    Broadcast,
    Commit,
    DiffPage,
    DiffRange,
    DiffStat,
    Discard,
    EngineInfo,
    FanOut,
    FinishState,
    Focus,
    FolderListing,
    FolderQuery,
    FolderRef,
    GroupRef,
    HistoryPage,
    HistoryRange,
    Merge,
    NewSession,
    NoArgs,
    Orchestrate,
    Pick,
    PickResult,
    PullRequest,
    Push,
    Rename,
    Reopen,
    Send,
    SendResult,
    SessionList,
    SessionRef,
    SetModel,
    StartWorker,
    TeamCall,
    TeamState,
    Unqueue,
    WaitWorkers,
    WorkerPrompt,
    WorkerRef,
    WorkerReply,
    WorkerState,
)
from polypilot_tui.engine.workspaces import WorkspaceDesk, in_git, own_worktree
from polypilot_tui.engine.worktree_cleanup import prune_orphaned_worktrees
from polypilot_tui.infra.event_loop import cancel_and_wait
from polypilot_tui.storage.notices import NoticeBoard, NoticeListener

if TYPE_CHECKING:
    from polypilot_tui.engine.persistence import Persistence

log = logging.getLogger(__name__)

Attach = Callable[[SessionManager, Settings], "Persistence"]
"""Restores saved sessions into the manager and keeps them saved (``attach_persistence``)."""

KEEP_CLOSED = 20
"""Closed sessions kept for an undo (the dashboard offers it for 30 s)."""
Q = TypeVar("Q")
R = TypeVar("R")


class LocalEngine(OneMachine):
    """A SessionManager, its persistence, change counts and worktree pruning, in this process."""

    def __init__(
        self, manager: SessionManager, attach: Attach | None = None, *, must_persist: bool = False, counts: bool = True
    ) -> None:
        self.manager = manager
        self._must_persist = must_persist
        """A restore that fails stops the start (the engine service) instead of running unsaved."""
        self.settings = manager.settings
        self._attach = attach
        self.persistence: Persistence | None = None
        """Saves sessions (None when nothing is saved: tests, ``attach`` not given)."""
        self.changes = ChangeCounter(manager, automatic=counts)
        """Counts what each session changed in its folder (``counts`` False: only when asked)."""
        self.notices = NoticeBoard()
        self._closed: OrderedDict[str, tuple[Session, int]] = OrderedDict()
        self._folder_watch: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[object]] = set()
        self._models = ModelDesk(manager)
        self._workspaces = WorkspaceDesk()
        self.fan_outs = FanOutDesk(self, manager, self.notices)
        """Broadcasts, fan-outs and their groups (engine/fan_out.py)."""
        self.started_at = manager.clock.wall()
        self.teams = TeamDesk(self)
        """Orchestrators, their workers and budgets (engine/teams.py)."""
        manager.tool_servers = self.teams.tool_servers  # each agent's relay, handed at its every connect

    @property
    def clock(self) -> Clock:
        return self.manager.clock

    @property
    def separate(self) -> bool:
        return False

    @property
    def persistent(self) -> bool:
        return self.persistence is not None

    # ---- reads -------------------------------------------------------------------------
    def ids(self) -> list[str]:
        return self.manager.ids()

    def view(self, session_id: str) -> SessionView:
        return self.manager.view(session_id)

    def views(self) -> tuple[SessionView, ...]:
        return self.manager.views()

    def history(self, session_id: str) -> Sequence[ChatItem]:
        return self.manager.history(session_id)

    def streaming_text(self, session_id: str) -> str:
        return self.manager.streaming_text(session_id)

    def subscribe(self, listener: Listener, *kinds: type[Record]) -> Unsubscribe:
        return self.manager.subscribe(listener, *kinds)

    def on_notice(self, listener: NoticeListener) -> Unsubscribe:
        return self.notices.listen(listener)

    def running_turns(self) -> int:
        """Sessions with a turn in flight."""
        return sum(1 for view in self.views() if view.status.busy)

    def alerts_here(self) -> bool:
        return True  # the only front end

    async def focus(self) -> None:
        """One front end: nothing to tell."""

    # ---- life --------------------------------------------------------------------------
    async def start(self) -> None:
        """Restore the saved sessions and keep them saved; prune orphaned worktrees."""
        if self._attach is not None:
            self._restore(self._attach)
        if self.persistence is not None:  # the groups of the sessions restored, kept beside them
            self.fan_outs.restore(self.persistence.store.state_dir)
        if self.persistence is not None:  # the sessions are back: their teams can be
            self.teams.restore(Path(self.settings.state_dir))
        if self.persistence is not None and not self.persistence.restored.problem:  # it knows every session
            self._spawn(self._prune_worktrees())

    def _restore(self, attach: Attach) -> None:
        try:
            self.persistence = attach(self.manager, self.settings)
        except Exception as exc:  # noqa: BLE001 - the engine still works, unsaved
            if self._must_persist:
                raise
            log.exception("restore failed")
            self.notices.tell(
                "restore-failed", f"Saved sessions could not be restored, and new ones will not be saved: {exc}"
            )
            return
        self.persistence.on_notice(self.notices.emit)  # saving problems, told once each
        if self.persistence.restored.problem:
            self.notices.tell("restore", self.persistence.restored.problem, "warning")

    async def _prune_worktrees(self) -> None:
        removed = await prune_orphaned_worktrees(self.manager, self.settings.worktree_root)
        if removed:
            self.notices.tell(
                "worktrees-pruned",
                f"Removed {len(removed)} worktree(s) no session used (clean and merged, or already gone).",
                "information",
            )

    def watch_folders(self, on: bool) -> None:
        """Notice a session folder deleted by hand, every heartbeat, while somebody watches."""
        if on and self._folder_watch is None:
            self._folder_watch = asyncio.get_running_loop().create_task(self._watch_folders())
        elif not on and self._folder_watch is not None:
            self._folder_watch.cancel()
            self._folder_watch = None

    async def _watch_folders(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_seconds)
            self.changes.check_folders()

    async def detach(self, stop_engine: bool = True) -> None:
        """In this process the engine goes with its front end: turns in flight end as interrupted."""
        await self.close(quitting=True)

    async def close(self, quitting: bool = True) -> None:
        """End the engine: with ``quitting``, turns in flight end as interrupted (else they stay on record)."""
        self.watch_folders(False)
        self.teams.closing()  # first: the waits pending now are delivered after the next start
        await cancel_and_wait(self._background)
        await self.changes.close()
        await self.fan_outs.close()
        try:
            if quitting:
                await self.manager.quit()
            else:
                await self.manager.shutdown()
        finally:
            await self.teams.close()
            await self.fan_outs.saved()  # the quit's turn ends are the attempts' too
            if self.persistence is not None:  # after the quit: the final state is what is saved
                await self.persistence.close()

    def _spawn(self, coro: object) -> None:
        task: asyncio.Task[object] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ---- the verbs (engine/verbs.py) ---------------------------------------------------
    async def call(self, verb: Verb[Q, R], request: Q) -> R:
        """Answer ``verb`` with the method of its name (tests/unit/test_verbs.py checks each)."""
        answer: Callable[[Q], Awaitable[R]] = getattr(self, verb.name)
        return await answer(request)

    def info(self) -> EngineInfo:
        """Who the engine is and how busy (``attached``: the service counts its clients)."""
        views = self.views()
        return EngineInfo(
            pid=os.getpid(),
            state_dir=str(self.settings.state_dir),
            started_at=self.started_at,
            now=self.clock.now(),
            wall=self.clock.wall(),
            sessions=len(views),
            running_turns=sum(1 for view in views if view.status.busy),
            persistent=self.persistent,
            keepalive=self.settings.stream_keepalive_seconds,
            api=API_VERSION,
        )

    async def engine_info(self, request: NoArgs) -> EngineInfo:
        return self.info()

    async def engine_stop(self, request: NoArgs) -> bool:
        """In this process the engine ends with its front end: turns in flight end as interrupted."""
        await self.close(quitting=True)
        return True

    async def focus_client(self, request: Focus) -> None:
        """One front end: nothing to tell."""

    async def agents(self, request: NoArgs) -> tuple[AgentOffer, ...]:
        # Off the loop: readiness looks on disk (commands, sign-in files) for every agent.
        return await asyncio.to_thread(self.manager.offers)

    async def sessions(self, request: NoArgs) -> SessionList:
        return SessionList(self.clock.now(), self.views())

    async def new_session(self, request: NewSession) -> str:
        """The session, in the folder asked for (its worktree made here, now) or its agent's."""
        config = self._agent(request.agent)
        sandbox = self._sandbox(request, config)
        name = request.name or f"{request.agent}-{len(self.ids()) + 1}"  # as the manager names it
        workspace = await self._workspaces.prepare(
            request, name, self.settings.worktree_root, str(config.cwd) if config.cwd else ""
        )
        try:
            return self.manager.add_session(request.agent, name, workspace=workspace, sandbox=sandbox)
        except ValueError as exc:  # made for a session that does not exist: removed again
            undone = await self._workspaces.unmake(workspace)
            raise EngineError(f"the session was not added: {exc}" + (f" ({undone})" if undone else "")) from None

    async def check_new_session(self, request: NewSession) -> None:
        self._sandbox(request, self._agent(request.agent))
        name = request.name or f"{request.agent}-{len(self.ids()) + 1}"
        await self._workspaces.check(request, name, self.settings.worktree_root)

    def _sandbox(self, request: NewSession, config: AgentConfig) -> Sandbox:
        """The sandbox asked for, else the agent's (the agents file's ``sandbox``); an EngineError
        that says why and how to fix it when it cannot start here (nothing is made then)."""
        sandbox = chosen(request.sandbox, config.sandbox, config.network)
        problem = sandbox_problem(sandbox)
        if problem is not None:
            raise EngineError(f"the session cannot run sandboxed here: {problem}")
        return sandbox

    def _agent(self, agent: str) -> AgentConfig:
        catalog = self.manager.catalog
        if agent not in catalog.agents:
            why = catalog.missing(agent)
            if catalog.source_changed():  # `polypilot agents` reads it now and may list the agent
                why += (
                    f" ({catalog.source} has changed since the engine read it at its start: restart the engine "
                    "with `polypilot engine stop`, the next command starts it again)"
                )
            raise EngineError(why)
        return catalog.agents[agent]

    async def inspect_folder(self, request: FolderRef) -> FolderInfo:
        return await self._workspaces.inspect_folder(request.path)

    async def list_folders(self, request: FolderQuery) -> FolderListing:
        return await self._workspaces.list_folders(request)

    async def session_view(self, request: SessionRef) -> SessionView:
        return self.view(self.known(request.session_id))

    async def history_page(self, request: HistoryRange) -> HistoryPage:
        if request.start < 0 or request.limit < 0:
            raise BadRequest("start and limit must not be negative")
        items = self.history(self.known(request.session_id))
        if not await read_in(items, request.start):  # a placeholder would be kept by the client as a row
            raise EngineError("saved chat rows of this session cannot be read now; ask again later")
        page = items[request.start : request.start + min(request.limit, HISTORY_PAGE)]
        return HistoryPage(len(items), request.start, tuple(page))

    async def details(self, request: SessionRef) -> SessionDetails:
        return self.manager.details(self.known(request.session_id))

    async def send(self, request: Send) -> SendResult:
        result = await self.manager.send(self.known(request.session_id), request.prompt)
        return "queued" if result == "queued" else "sent"

    async def stop(self, request: SessionRef) -> None:
        await self.manager.stop(self.known(request.session_id))

    async def reconnect(self, request: SessionRef) -> None:
        await self.manager.reconnect(self.known(request.session_id))

    async def resend(self, request: SessionRef) -> bool:
        return await self.manager.resend_interrupted(self.known(request.session_id))

    async def send_queued(self, request: SessionRef) -> bool:
        return await self.manager.send_queued(self.known(request.session_id))

    async def unqueue(self, request: Unqueue) -> str | None:
        return self.manager.unqueue(self.known(request.session_id), request.index, request.expected)

    async def clear_queue(self, request: SessionRef) -> int:
        return self.manager.clear_queue(self.known(request.session_id))

    async def answer_permission(self, request: AnswerPermission) -> None:
        await self.manager.answer_permission(self.known(request.session_id), request.request_id, request.option_id)

    async def rename(self, request: Rename) -> None:
        self.manager.rename(self.known(request.session_id), request.name)

    async def close_session(self, request: SessionRef) -> bool:
        """Stop and close a session, kept for an undo (:meth:`reopen`)."""
        session_id = request.session_id
        ids = self.ids()
        position = ids.index(session_id) if session_id in ids else 0
        session = await self.manager.close(session_id)
        if session is None:
            return False
        self._closed[session_id] = (session, position)
        while len(self._closed) > KEEP_CLOSED:
            gone, _ = self._closed.popitem(last=False)
            if self.persistence is not None:  # no undo for it any more: rows kept for one go
                self.persistence.history.end_undo([gone])
        return True

    async def reopen(self, request: Reopen) -> None:
        closed = self._closed.pop(request.session_id, None)
        if closed is None:
            raise EngineError("that session can no longer be brought back")
        session, was_at = closed
        self.manager.reopen(session, was_at if request.position is None else request.position)

    async def refresh_changes(self, request: SessionRef) -> None:
        self.changes.refresh(self.known(request.session_id))

    async def models(self, request: SessionRef) -> ModelChoices:
        return await self._models.models(self.known(request.session_id))

    async def set_model(self, request: SetModel) -> None:
        await self._models.set_model(self.known(request.session_id), request.model)

    # ---- teams (engine/teams.py) ---------------------------------------------------------
    async def orchestrate(self, request: Orchestrate) -> TeamState:
        return await self.teams.orchestrate(request)

    async def team_state(self, request: SessionRef) -> TeamState:
        return await self.teams.team_state(request)

    async def stop_workers(self, request: SessionRef) -> int:
        return await self.teams.stop_workers(request)

    async def team_workers(self, request: TeamCall) -> tuple[WorkerState, ...]:
        return await self.teams.team_workers(request)

    async def team_start(self, request: StartWorker) -> WorkerState:
        return await self.teams.team_start(request)

    async def team_send(self, request: WorkerPrompt) -> WorkerState:
        return await self.teams.team_send(request)

    async def team_wait(self, request: WaitWorkers) -> tuple[WorkerState, ...]:
        return await self.teams.team_wait(request)

    async def team_read(self, request: WorkerRef) -> WorkerReply:
        return await self.teams.team_read(request)

    async def team_stop(self, request: WorkerRef) -> WorkerState:
        return await self.teams.team_stop(request)

    async def team_hello(self, request: TeamCall) -> None:
        """The relay of a session's agent was asked for its tools: they arrived (engine/tool_handoff.py)."""
        self.manager.tools_arrived(request.capability)

    # ---- its folder (engine/workspaces.py) ----------------------------------------
    async def diff(self, request: DiffRange) -> DiffPage:
        return await self._workspaces.diff_page(request, self._in_git(request.session_id))

    async def diff_stat(self, request: SessionRef) -> DiffStat:
        return await self._workspaces.diff_stat(self._in_git(request.session_id))

    async def finish_state(self, request: SessionRef) -> FinishState:
        return await self._workspaces.finish_state(self._own(request.session_id))

    async def commit_message(self, request: SessionRef) -> str:
        workspace = self._own(request.session_id)
        return await self._workspaces.commit_message(workspace, await self._prompts(request.session_id))

    async def commit(self, request: Commit) -> str:
        try:
            return await self._workspaces.commit(self._own(request.session_id), request.message)
        finally:
            self.changes.refresh(request.session_id)

    async def merge(self, request: Merge) -> MergeResult:
        try:
            return await self._workspaces.merge(self._own(request.session_id), request.fast_forward_only)
        finally:
            self.changes.refresh(request.session_id)

    async def push(self, request: Push) -> str:
        return await self._workspaces.push(self._own(request.session_id), request.remote)

    async def pull_request(self, request: PullRequest) -> str:
        workspace = self._own(request.session_id)
        prompts = await self._prompts(request.session_id) if not request.title.strip() else ()
        return await self._workspaces.pull_request(workspace, request.title, request.body, prompts)

    async def discard(self, request: Discard) -> str:
        try:
            said = await self._workspaces.discard(self._own(request.session_id), request.force)
            self.fan_outs.discarded(request.session_id)
            return said
        finally:
            self.changes.refresh(request.session_id)  # a discarded worktree: the session says its folder is gone

    # ---- many sessions at once (engine/fan_out.py) ---------------------------------
    async def broadcast(self, request: Broadcast) -> tuple[BroadcastResult, ...]:
        return await self.fan_outs.broadcast(request)

    async def fan_out(self, request: FanOut) -> str:
        return await self.fan_outs.fan_out(request)

    async def compare(self, request: GroupRef) -> Comparison:
        return await self.fan_outs.compare(request)

    async def run_check(self, request: GroupRef) -> Comparison:
        return await self.fan_outs.run_check(request)

    async def pick(self, request: Pick) -> PickResult:
        return await self.fan_outs.pick(request)

    async def _prompts(self, session_id: str) -> list[str]:
        """The session's prompts, in order (rows saved before a restart read in first)."""
        items = self.history(session_id)
        await read_in(items)
        return [item.text for item in items if item.kind is ItemKind.USER]

    def _own(self, session_id: str) -> Workspace:
        view = self.view(self.known(session_id))
        return own_worktree(view.name, view.workspace)

    def _in_git(self, session_id: str) -> Workspace:
        view = self.view(self.known(session_id))
        return in_git(view.name, view.workspace)

    def known(self, session_id: str) -> str:
        """``session_id``, when a session has it; else UnknownSession."""
        if session_id not in self.manager.ids():
            raise UnknownSession(f"no session {session_id!r} (closed meanwhile?)")
        return session_id
