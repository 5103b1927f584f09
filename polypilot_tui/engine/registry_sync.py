"""The registry half of persistence: ``sessions.json`` written at most ``delay`` after a
change, off the loop, retried with backoff, its problems told once on the notice board."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypedDict

from polypilot_tui.domain.limits import ID_CHARS, NAME_CHARS, REASON_CHARS, TITLE_CHARS, bounded
from polypilot_tui.domain.sandbox import NO_SANDBOX, Sandbox, SandboxMode
from polypilot_tui.domain.view import derive_status
from polypilot_tui.domain.workspace import Isolation, Workspace
from polypilot_tui.engine.debounced import DebouncedWriter
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.storage.notices import NoticeBoard
from polypilot_tui.storage.registry import Registry, RegistryFenced, SessionRecord

FAILING = "registry"
"""Notice key of a registry that cannot be written."""


def session_records(manager: SessionManager) -> tuple[SessionRecord, ...]:
    """Every session of ``manager`` as a registry record (text is redacted by the registry).

    A record fits limits.RECORD_BYTES: the prompts are bounded where they come in, the
    agents' texts here (ids, folders and branches are bounded where they come in too)."""
    clock = manager.clock
    now, wall = clock.now(), clock.wall()
    records = []
    for sid in manager.ids():
        s = manager.session(sid)
        status, reason = derive_status(s)
        turn = s.turn
        activity = None if s.last_activity_at is None else wall - max(0.0, now - s.last_activity_at)
        records.append(
            SessionRecord(
                id=s.id,
                name=bounded(s.name, NAME_CHARS),
                agent=s.agent,
                cwd=s.cwd,
                model=bounded(s.model, ID_CHARS),
                agent_session_id=s.agent_session_id,
                title=bounded(s.title, TITLE_CHARS),
                created_at=s.created_wall,
                status=status.value,
                reason=bounded(reason, REASON_CHARS),
                last_activity_at=activity,
                turn_in_flight=turn is not None,
                last_prompt=(turn.prompt or s.last_prompt) if turn else "",
                interrupted_prompt=s.interrupted_prompt,
                turns=s.earlier_turns + len(s.turns),
                queue=tuple(p.text for p in s.queue),
                usage=s.usage,
                model_choice=bounded(s.model_choice, ID_CHARS),
                **workspace_fields(s.workspace),
                sandbox="" if not s.sandbox.on else s.sandbox.mode.value,
                sandbox_network=s.sandbox.network,
            )
        )
    return tuple(records)


class WorkspaceFields(TypedDict, total=False):
    """The registry's flat form of a workspace (its folder is the record's ``cwd``)."""

    isolation: str
    repo: str
    branch: str
    base: str
    base_commit: str


def workspace_fields(workspace: Workspace | None) -> WorkspaceFields:
    """A session's workspace as :class:`SessionRecord` fields (none without a workspace)."""
    if workspace is None:
        return {}
    return WorkspaceFields(
        isolation=workspace.isolation.value,
        repo=workspace.repo,
        branch=workspace.branch,
        base=workspace.base,
        base_commit=workspace.base_commit,
    )


def sandbox_of(record: SessionRecord) -> Sandbox:
    """The sandbox a registry record describes. A mode this version does not know restores as
    the strictest sandbox (no network but through a rule with no host), never as none."""
    if record.sandbox in ("", SandboxMode.OFF.value):
        return NO_SANDBOX
    try:
        mode = SandboxMode(record.sandbox)
    except ValueError:
        return Sandbox(SandboxMode.WORKSPACE, network=())
    return Sandbox(mode, record.sandbox_network)


def workspace_of(record: SessionRecord) -> Workspace | None:
    """The workspace a registry record describes (None for a record without one)."""
    try:
        isolation = Isolation(record.isolation)
    except ValueError:
        return None  # none recorded (an older file), or one this version does not know
    return Workspace(record.cwd, isolation, record.repo, record.branch, record.base, record.base_commit)


class RegistryWriter(DebouncedWriter):
    """Debounced, retried writes of one registry; stops for good when fenced."""

    def __init__(
        self,
        manager: SessionManager,
        registry: Registry,
        io: Executor,
        board: NoticeBoard,
        delay: float,
        on_fenced: Callable[[str], None],
    ) -> None:
        super().__init__(manager.clock, delay)
        self._manager = manager
        self._registry = registry
        self._io = io
        self._board = board
        self._on_fenced = on_fenced
        self._loop = asyncio.get_running_loop()
        self._last: tuple[SessionRecord, ...] | None = None

    @property
    def failing(self) -> bool:
        """The last write failed and the problem is still open."""
        return self._board.open(FAILING)

    def start_write(self) -> asyncio.Future[Any] | None:
        snapshot = session_records(self._manager)
        if self.stopped or snapshot == self._last:
            return None
        flight = self._loop.run_in_executor(self._io, self._registry.save, snapshot, self._manager.clock.wall())
        return self.launch(flight, lambda f: self._landed(snapshot, f))

    def _landed(self, snapshot: tuple[SessionRecord, ...], flight: asyncio.Future[Any]) -> None:
        error = OSError("cancelled") if flight.cancelled() else flight.exception()
        path = self._registry.path
        if isinstance(error, RegistryFenced):
            self.stopped = True
            self._on_fenced(str(error))
            return
        if error is not None:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            self._board.tell(
                FAILING,
                f"The session list cannot be saved to {path}: {reason}. It is kept in "
                "memory and saved as soon as it can be written again.",
            )
            self._last = None
            self.retry_later()
            return
        self._board.over(FAILING, f"The session list is saved again to {path}.")
        self._last = snapshot
        self.written()
        if session_records(self._manager) != snapshot:
            self.arm()
