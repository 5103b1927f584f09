"""Bringing saved sessions back: registry records and history rows become adopted sessions."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import field
from functools import partial

from polypilot_tui.agents.sandbox import sandbox_problem
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.history import History
from polypilot_tui.domain.prompt_queue import QueuedPrompt
from polypilot_tui.domain.session import Session
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.registry_sync import sandbox_of, workspace_of
from polypilot_tui.storage.registry import SessionRecord
from polypilot_tui.storage.store import Store

log = logging.getLogger(__name__)


@dataclass
class RestoreResult:
    """What :func:`restore_sessions` brought back."""

    ids: list[str] = field(default_factory=list)
    mid_turn: list[str] = field(default_factory=list)
    unloaded: set[str] = field(default_factory=set)
    """Sessions whose history could not be read (locked database): shown empty, kept on disk."""
    draft_ids: set[str] = field(default_factory=set)
    """Sessions whose unfinished streamed reply came back as an interrupted assistant row."""
    problem: str = ""


BeforeAdopt = Callable[[Session, bool], None]
"""(session, history loaded) — called before a restored session is adopted."""


def restore_sessions(manager: SessionManager, store: Store, before_adopt: BeforeAdopt | None = None) -> RestoreResult:
    """Build every saved session (agent session id kept; chat rows read when first looked at,
    see :func:`_histories`) and adopt it.

    Lazy: only a session whose turn was in flight reconnects at once, mid-turn, with the
    30 s resume-quiescence tier seeded from now; the engine reports a lost turn as
    interrupted with a one-key resend.
    """
    snapshot = store.registry.load()
    known = set(manager.ids())
    records = [r for r in snapshot.sessions if r.id not in known]
    ids = [r.id for r in records]
    drafts = store.history.load_drafts(ids) or {}
    histories = _histories(store, records, set(drafts))
    problem = ""
    kept = f"it was moved to {snapshot.moved_to}" if snapshot.moved_to else "it was left as it is"
    if snapshot.lost:
        problem = (
            f"The saved session list was read back in part: {snapshot.problem}; {kept}, and the other "
            f"{len(records)} session(s) are back."
        )
    elif snapshot.problem:
        problem = f"The saved session list could not be used: {snapshot.problem}; {kept} and the list starts empty."
    result = RestoreResult(problem=problem)
    clock = manager.clock
    now, wall = clock.now(), clock.wall()
    cannot: dict[str, str | None] = {}  # per agent: one look for all its sessions (200 looks took ~22 %)
    for record in records:
        history = histories.get(record.id)
        session = Session(
            record.id,
            record.name,
            record.agent,
            created_wall=record.created_at,
            cwd=record.cwd,
            model=record.model,
            agent_session_id=record.agent_session_id,
            title=record.title,
            history=history if history is not None else History(),
        )
        session.workspace = workspace_of(record)
        session.sandbox = sandbox_of(record)  # never dropped: restored sandboxed, or not started
        session.last_prompt = record.last_prompt
        session.earlier_turns = record.turns
        session.queue = [QueuedPrompt.of(text) for text in record.queue]
        session.model_choice = record.model_choice
        session.queue_held = bool(record.queue)  # after a restart the user decides when they go
        session.usage = record.usage  # a restarted dashboard does not show zero for a spent session
        if record.last_activity_at is not None:  # "last activity 3 h ago" survives the restart
            session.last_activity_at = now - max(0.0, wall - record.last_activity_at)
        mid_turn = record.turn_in_flight
        if record.agent not in cannot:
            cannot[record.agent] = manager.cannot_start(record.agent)
        unsandboxable = None if cannot[record.agent] else sandbox_problem(session.sandbox)
        if cannot[record.agent]:  # said now, not by the first prompt failing; Reconnect tries again
            session.lost = f"agent {record.agent!r} cannot start here: {cannot[record.agent]}"
        elif unsandboxable:  # the agent is there: its sandbox is not (the same words as its start's)
            session.lost = f"the session is sandboxed and its sandbox cannot start: {unsandboxable}"
        if session.lost:
            mid_turn = False
        if not mid_turn:
            session.interrupted_prompt = record.interrupted_prompt or (
                record.last_prompt if record.turn_in_flight else ""
            )
        if before_adopt is not None:
            before_adopt(session, history is not None)
        manager.adopt(session, mid_turn_prompt=record.last_prompt if mid_turn else None)
        if history is None:
            result.unloaded.add(record.id)
        elif record.id in drafts:
            text, at = drafts[record.id]
            session.add_item(ItemKind.ASSISTANT, text, at, interrupted=True)  # on the stream: written through
            result.draft_ids.add(record.id)
        result.ids.append(record.id)
        if mid_turn:
            result.mid_turn.append(record.id)
    if records:
        log.info("restored %d sessions (%d mid-turn)", len(result.ids), len(result.mid_turn))
    return result


def _histories(store: Store, records: list[SessionRecord], drafts: set[str]) -> dict[str, History]:
    """Each session's history; rows stay on disk where the restore does not change them.

    Read at once: sessions with tool rows a killed run left open (settled now), gaps (renumbered
    now), a draft (it becomes a row) or a turn in flight (it reconnects now); and every session
    when the extents cannot be read (the old way, which says what failed and how). Sessions
    missing from the result could not be read at all.
    """
    ids = [r.id for r in records]
    extents = store.saved.extents(ids) if ids else {}
    if extents is None:
        return {sid: History(rows) for sid, rows in store.history.load_many(ids).items()}
    in_flight = {r.id for r in records if r.turn_in_flight}
    result: dict[str, History] = {sid: History() for sid in ids if sid not in extents}  # nothing saved
    eager = []
    for sid, extent in extents.items():
        if extent.open_tools or extent.rows != extent.end or sid in drafts or sid in in_flight:
            eager.append(sid)
        else:
            result[sid] = History(saved=extent.rows, read=partial(store.saved.read, sid))
    result.update((sid, History(rows)) for sid, rows in store.history.load_many(eager).items())
    return result
