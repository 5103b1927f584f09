"""One app process for the restart test: a SessionManager + persistence on the demo agent.

``fresh STATE_DIR``: start a session, send ``!slow`` (streams ~30 s), wait until some of the
reply is on disk (the streaming draft in history.db, deltas in the recording, the turn in
sessions.json), print ``{"ready": ...}`` and wait to be killed.

``restore STATE_DIR [--resend]``: restore, print ``{"restored": ...}``, wait until the resumed
turn ends or is reported interrupted (``{"outcome": ...}``), optionally resend it with the
one-key action and wait for that turn (``{"resent": ...}``), then quit cleanly.

Every line on stdout is one JSON object; every wait has a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.session import Session
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import Persistence, attach_persistence
from tests.support.waiting import until


def emit(kind: str, **data: Any) -> None:
    print(json.dumps({kind: data}, ensure_ascii=False), flush=True)


def history(session: Session) -> list[dict[str, Any]]:
    return [{"kind": item.kind.value, "text": item.text, "interrupted": item.interrupted} for item in session.history]


def on_disk(state_dir: Path, sid: str, recording: Path | None) -> dict[str, Any]:
    """What another process would find: the draft, the registry entry, recorded deltas."""
    draft = ""
    try:
        with sqlite3.connect(f"file:{state_dir / 'history.db'}?mode=ro", uri=True) as conn:
            row = conn.execute("SELECT text FROM drafts WHERE session_id=?", (sid,)).fetchone()
            draft = row[0] if row else ""
    except sqlite3.Error:
        pass
    in_flight = False
    try:
        registry = json.loads((state_dir / "sessions.json").read_text())
        in_flight = any(s["id"] == sid and s["turn_in_flight"] for s in registry["sessions"])
    except (OSError, ValueError, KeyError):
        pass
    deltas = 0
    if recording is not None and recording.exists():
        deltas = recording.read_text().count('"assistant.message_delta"')
    return {"draft": draft, "in_flight": in_flight, "recorded_deltas": deltas}


async def open_app(state_dir: Path, speed: float) -> tuple[SessionManager, Persistence]:
    settings = Settings.read(None, state_dir=state_dir, demo_speed=speed)
    manager = SessionManager(settings, load_agents(None), SystemClock())
    return manager, attach_persistence(manager, settings)


async def fresh(state_dir: Path) -> int:
    manager, persistence = await open_app(state_dir, speed=1.0)
    sid = await manager.create_session("demo", "restart-e2e")
    await manager.send(sid, "!slow")
    recorder = persistence.recorder
    facts: dict[str, Any] = {}

    def flushed() -> bool:
        facts.update(on_disk(state_dir, sid, recorder.path(sid) if recorder else None))
        return len(facts["draft"].split()) >= 6 and facts["in_flight"] and facts["recorded_deltas"] >= 6

    await until(flushed, 25, "streamed text on disk")
    emit(
        "ready",
        session_id=sid,
        history=history(manager.session(sid)),
        recording=str(recorder.path(sid)) if recorder else "",
        **facts,
    )
    await asyncio.sleep(120)  # the test SIGKILLs us mid-turn long before this ends
    emit("error", message="not killed")
    return 1


async def restore(state_dir: Path, resend: bool) -> int:
    started = time.monotonic()
    manager, persistence = await open_app(state_dir, speed=20.0)
    restored = persistence.restored
    if len(restored.ids) != 1:
        emit("error", message=f"expected one restored session, got {restored.ids}")
        return 1
    sid = restored.ids[0]
    session = manager.session(sid)
    emit(
        "restored",
        session_id=sid,
        mid_turn=sid in restored.mid_turn,
        history=history(session),
        status=manager.view(sid).status.value,
        agent_session_id=session.agent_session_id,
        recording=str(persistence.recorder.path(sid) or "") if persistence.recorder else "",
    )
    await until(lambda: session.turn is None, 40, "end of the resumed turn")
    last = session.last_outcome
    emit(
        "outcome",
        seconds=round(time.monotonic() - started, 2),
        status=manager.view(sid).status.value,
        outcome=last.outcome.value if last else "",
        reason=last.reason if last else "",
        interrupted_prompt=session.interrupted_prompt,
        history=history(session),
    )
    if resend:
        turns = len(session.turns)
        ok = await manager.resend_interrupted(sid)
        await until(lambda: len(session.turns) > turns and session.turn is None, 30, "end of the resent turn")
        last = session.last_outcome
        emit(
            "resent",
            ok=ok,
            outcome=last.outcome.value if last else "",
            status=manager.view(sid).status.value,
            history=history(session),
        )
    await manager.shutdown()
    await persistence.close()
    emit("closed", recording=str(persistence.recorder.path(sid) or "") if persistence.recorder else "")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("fresh", "restore"))
    parser.add_argument("state_dir", type=Path)
    parser.add_argument("--resend", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.mode == "fresh":
            return asyncio.run(fresh(args.state_dir))
        return asyncio.run(restore(args.state_dir, args.resend))
    except AssertionError as exc:  # a wait that timed out (tests/support/waiting.py)
        emit("error", message=str(exc))
        return 1


if __name__ == "__main__":
    sys.exit(main())
