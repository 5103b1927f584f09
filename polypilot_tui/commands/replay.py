"""``polypilot replay``: run a trace through the real engine and watchdog in virtual time.

The trace's user actions (send, stop, reconnect) are asked of a LocalEngine through its one
front door, :meth:`~polypilot_tui.engine.local.LocalEngine.call`, as the dashboard asks them;
what the trace says the agent did is fed to the session's backend (the trace is the agent),
and a restore is the engine's own (``adopt``), as at a start."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import field
from pathlib import Path
from typing import Any

from msgspec import structs

from polypilot_tui.agents.base import ConnectResult, EventSink, NullBackend
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.records import ActionTaken, EngineAction, Record, TurnEnded, ViewChanged
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.trace import TraceEntry, parse_trace
from polypilot_tui.engine import verbs
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.local import LocalEngine

DEFAULT_HORIZON = 4 * 3600.0
SESSION_ID = "replay"


def replay_backend(sink: EventSink, restore: dict[str, Any]) -> NullBackend:
    """A backend whose agent is the trace; ``restore`` hints become its connect result."""
    hints = ConnectResult(
        "replay-session",
        "resumed" if restore else "new session",
        resumed=bool(restore),
        interrupted_tool=bool(restore.get("interrupted_tool")),
        still_processing=bool(restore.get("still_processing")),
        lost_turn=bool(restore.get("lost_turn")),
    )
    return NullBackend(sink, hints)


@dataclass
class ReplayResult:
    """The timeline (JSON-ready dicts, in order) and the final state."""

    timeline: list[dict[str, Any]] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)


async def run_trace(
    lines: Iterable[str], settings: Settings | None = None, horizon: float = DEFAULT_HORIZON
) -> ReplayResult:
    """Replay ``lines``; raises TraceError (with the line number) on an invalid trace."""
    entries = parse_trace(lines)
    with tempfile.TemporaryDirectory(prefix="polypilot-replay-") as tmp:
        base = settings or Settings.read(None)
        settings = structs.replace(base, state_dir=Path(tmp), record=False)
        return await _run(entries, settings, horizon)


async def _run(entries: list[TraceEntry], settings: Settings, horizon: float) -> ReplayResult:
    clock = FakeClock()
    result = ReplayResult()
    restore = next((dict(e.value) for e in entries if e.action == "restore"), {})

    def factory(agent: str, sink: EventSink, workdir: Path) -> NullBackend:
        return replay_backend(sink, restore)

    catalog = AgentCatalog({"replay": AgentConfig(name="replay", kind="demo")})
    engine = build_engine(settings, catalog, clock, persist=False, backend_factory=factory)
    manager = engine.manager
    last: dict[str, Any] = {}
    recoveries = 0

    def on_change(change: Record) -> None:
        nonlocal recoveries
        if isinstance(change, TurnEnded):
            record = change.record
            result.timeline.append(
                {
                    "at": _t(clock),
                    "turn_end": record.outcome.value,
                    "reason": record.reason,
                    **({"detail": record.detail} if record.detail else {}),
                }
            )
        elif isinstance(change, ActionTaken):
            details: dict[str, Any] = {"reason": change.reason} if change.reason else {}
            details.update({"detail": change.detail} if change.detail else {})
            details.update({"prompt": change.prompt} if change.prompt else {})
            details.update({"attempt": change.attempt} if change.attempt else {})
            recoveries += change.action is EngineAction.RECONNECT and change.attempt > 0
            result.timeline.append({"at": _t(clock), "action": change.action.value, **details})
            return
        if change.session_id not in engine.ids():
            return
        view = engine.view(change.session_id)
        if (view.status.value, view.reason) != (last.get("status"), last.get("reason")):
            last.update(status=view.status.value, reason=view.reason)
            result.timeline.append({"at": _t(clock), "status": view.status.value, "reason": view.reason})

    engine.subscribe(on_change, ViewChanged, TurnEnded, ActionTaken)

    if restore:
        session = Session(SESSION_ID, "replay", "replay", created_wall=clock.wall(), agent_session_id="replay-session")
        prompt = str(restore.get("prompt", "(prompt before the restart)"))
        manager.adopt(session, mid_turn_prompt=prompt if restore.get("mid_turn") else None)
    else:
        manager.add_session("replay", "replay", session_id=SESSION_ID, connect=False)
        await manager.connect(SESSION_ID)
    for entry in entries:
        await clock.advance_to(entry.at)
        await _perform(engine, entry)
    await clock.settle()
    while manager.session(SESSION_ID).turn is not None or manager.session(SESSION_ID).recovering:
        deadline = clock.next_deadline()
        if deadline is None or deadline > horizon:
            break
        await clock.advance_to(deadline)
    await manager.idle()
    await engine.close(quitting=False)  # turns in flight stay on record: the timeline says how they went
    session = manager.session(SESSION_ID)
    view = engine.view(SESSION_ID)
    result.final = {
        "status": view.status.value,
        "turns": [
            {
                "seq": r.seq,
                "outcome": r.outcome.value,
                "reason": r.reason,
                "detail": r.detail,
                "started_at": round(r.started_at, 3),
                "ended_at": round(r.ended_at, 3),
                "tool_calls": r.tool_calls,
            }
            for r in session.turns
        ],
        "permission_warning": view.permission_warning or recoveries > 0,
        "history_chars": sum(
            len(item.text) for item in session.history if item.kind in (ItemKind.ASSISTANT, ItemKind.REASONING)
        ),
    }
    return result


async def _perform(engine: LocalEngine, entry: TraceEntry) -> None:
    if entry.action == "send":
        await engine.call(verbs.SEND, verbs.Send(SESSION_ID, entry.value))
    elif entry.action == "event":
        current = engine.manager.backend(SESSION_ID)
        if current is not None:  # after connection.lost the agent is gone until a reconnect
            current.sink(entry.event)  # type: ignore[attr-defined]  # a NullBackend: the trace is the agent
    elif entry.action == "stop":
        await engine.call(verbs.STOP, verbs.SessionRef(SESSION_ID))
    elif entry.action == "reconnect":
        await engine.call(verbs.RECONNECT, verbs.SessionRef(SESSION_ID))
    await engine.manager.idle()


def _t(clock: FakeClock) -> float:
    return round(clock.now(), 3)


def format_line(item: dict[str, Any]) -> str:
    """Human form of one timeline entry."""
    if "final" in item:
        final = item["final"]
        turns = ", ".join(f"#{t['seq']} {t['outcome']}" for t in final["turns"]) or "none"
        return (
            f"final: {final['status']} · turns: {turns} · permission warning: "
            f"{'yes' if final['permission_warning'] else 'no'} · {final['history_chars']} chars of replies"
        )
    at = f"{item['at']:>9.1f}s"
    if "status" in item:
        reason = f"  ({item['reason']})" if item["reason"] else ""
        return f"{at}  status  {item['status']}{reason}"
    if "turn_end" in item:
        detail = f" [{item['detail']}]" if item.get("detail") else ""
        return f"{at}  turn    {item['turn_end']}: {item['reason']}{detail}"
    details = ", ".join(f"{k}={v}" for k, v in item.items() if k not in ("at", "action"))
    return f"{at}  action  {item['action']}{'  (' + details + ')' if details else ''}"
