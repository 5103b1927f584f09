"""One app process for the Copilot restart test: SessionManager + persistence + the real CLI.

``fresh STATE_DIR``: create a Copilot session (agent from POLYPILOT_AGENTS_FILE), finish
one turn (``remember the word PELICAN``), send a ``SLOW`` prompt and wait until part of
its reply is on disk (the draft in history.db, deltas in the recording, the turn in
sessions.json), print ``{"ready": ...}`` and wait to be SIGKILLed.

``restore STATE_DIR``: restore, print ``{"restored": ...}``, wait until the resumed turn
ends or is reported interrupted (``{"outcome": ...}``), send one more prompt asking for
the word (``{"asked": ...}``), then quit cleanly (``{"closed": ...}``).

``fresh-permission`` / ``restore-permission``: the same with a tool call waiting on its
permission prompt when the app dies; after the restore the prompt comes back, is allowed,
and the turn resumes and completes.

Every line on stdout is one JSON object; every wait has a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.records import Record, ViewChanged
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import Persistence, attach_persistence
from tests.e2e.restart_driver import history, on_disk  # the demo driver's helpers
from tests.support.waiting import until

AGENT = "copilot"


def emit(kind: str, **data: Any) -> None:
    print(json.dumps({kind: data}, ensure_ascii=False), flush=True)


def cli_pid(manager: SessionManager, sid: str) -> int | None:
    backend = manager.backend(sid)
    return getattr(backend, "pid", None) if backend is not None else None


async def open_app(state_dir: Path) -> tuple[SessionManager, Persistence]:
    settings = Settings.read(
        None,
        state_dir=state_dir,  # type: ignore[call-arg]
        agents_file=Path(os.environ["POLYPILOT_AGENTS_FILE"]),
    )
    manager = SessionManager(settings, load_agents(settings.agents_file), SystemClock())
    return manager, attach_persistence(manager, settings)


def status_log(manager: SessionManager, sid: str) -> list[str]:
    seen: list[str] = []

    def changed(change: Record) -> None:
        if change.session_id == sid and sid in manager.ids():
            status = manager.view(sid).status.value
            if not seen or seen[-1] != status:
                seen.append(status)

    manager.subscribe(changed, ViewChanged)
    return seen


async def fresh(state_dir: Path) -> int:
    manager, persistence = await open_app(state_dir)
    sid = await manager.create_session(AGENT, "copilot-restart")
    session = manager.session(sid)
    await manager.send(sid, "remember the word PELICAN")
    await until(lambda: session.turn is None and bool(session.turns), 45, "the first turn to end")
    await manager.send(sid, "now tell me something SLOW")
    recorder = persistence.recorder
    facts: dict[str, Any] = {}

    def flushed() -> bool:
        facts.update(on_disk(state_dir, sid, recorder.path(sid) if recorder else None))
        return len(facts["draft"].split()) >= 6 and facts["in_flight"] and facts["recorded_deltas"] >= 6

    await until(flushed, 40, "streamed text on disk")
    emit(
        "ready",
        session_id=sid,
        history=history(session),
        agent_session_id=session.agent_session_id,
        cli_pid=cli_pid(manager, sid),
        recording=str(recorder.path(sid)) if recorder else "",
        **facts,
    )
    await asyncio.sleep(120)  # the test SIGKILLs us mid-turn long before this ends
    emit("error", message="not killed")
    return 1


async def fresh_permission(state_dir: Path) -> int:
    """A tool call waits on a permission prompt when the app dies (the CLI keeps such a turn)."""
    manager, persistence = await open_app(state_dir)
    sid = await manager.create_session(AGENT, "copilot-restart")
    session = manager.session(sid)
    await manager.send(sid, "TOOL CMD=`echo resumed-ok`")
    await until(lambda: session.turn is not None and bool(session.turn.pending_permissions), 45, "the prompt")
    assert session.turn is not None
    [request_id] = list(session.turn.pending_permissions)
    backend = manager.backend(sid)
    log_path = getattr(backend, "log_path", None)
    facts: dict[str, Any] = {}

    def flushed() -> bool:  # the CLI batches its own log: the request must be in it to survive
        facts.update(on_disk(state_dir, sid, None))
        return (
            facts["in_flight"]
            and log_path is not None
            and log_path.exists()
            and request_id in log_path.read_text(errors="replace")
        )

    await until(flushed, 20, "the permission request on disk")
    emit(
        "ready",
        session_id=sid,
        history=history(session),
        agent_session_id=session.agent_session_id,
        cli_pid=cli_pid(manager, sid),
        request_id=request_id,
        status=manager.view(sid).status.value,
    )
    await asyncio.sleep(120)
    emit("error", message="not killed")
    return 1


async def restore_permission(state_dir: Path) -> int:
    """The restored turn shows the prompt again; allowing it runs the tool and ends the turn."""
    started = time.monotonic()
    manager, persistence = await open_app(state_dir)
    sid = persistence.restored.ids[0]
    session = manager.session(sid)
    statuses = status_log(manager, sid)
    await until(
        lambda: session.turn is not None and bool(session.turn.pending_permissions),
        35,
        "the permission prompt to come back",
    )
    assert session.turn is not None
    [request_id] = list(session.turn.pending_permissions)
    emit(
        "asking",
        seconds=round(time.monotonic() - started, 2),
        request_id=request_id,
        status=manager.view(sid).status.value,
        resumed=session.turn.resumed,
    )
    await manager.answer_permission(sid, request_id, "allow_once")
    await until(lambda: session.turn is None, 45, "the resumed turn to end")
    last = session.last_outcome
    emit(
        "outcome",
        outcome=last.outcome.value if last else "",
        reason=last.reason if last else "",
        status=manager.view(sid).status.value,
        history=history(session),
        statuses=list(statuses),
        turns=len(session.turns),
    )
    await manager.shutdown()
    await persistence.close()
    emit("closed")
    return 0


async def restore(state_dir: Path) -> int:
    started = time.monotonic()
    manager, persistence = await open_app(state_dir)
    restored = persistence.restored
    if len(restored.ids) != 1:
        emit("error", message=f"expected one restored session, got {restored.ids}")
        return 1
    sid = restored.ids[0]
    session = manager.session(sid)
    statuses = status_log(manager, sid)
    emit(
        "restored",
        session_id=sid,
        mid_turn=sid in restored.mid_turn,
        history=history(session),
        status=manager.view(sid).status.value,
        agent_session_id=session.agent_session_id,
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
        agent_session_id=session.agent_session_id,
        statuses=list(statuses),
        cli_pid=cli_pid(manager, sid),
    )
    turns = len(session.turns)
    await manager.send(sid, "what was the word")
    await until(lambda: len(session.turns) > turns and session.turn is None, 45, "end of the next turn")
    last = session.last_outcome
    emit(
        "asked",
        outcome=last.outcome.value if last else "",
        status=manager.view(sid).status.value,
        history=history(session),
    )
    recording = persistence.recorder.path(sid) if persistence.recorder else None
    await manager.shutdown()
    await persistence.close()
    emit("closed", recording=str(recording or ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("fresh", "restore", "fresh-permission", "restore-permission"))
    parser.add_argument("state_dir", type=Path)
    args = parser.parse_args(argv)
    try:
        mode = {
            "fresh": fresh,
            "restore": restore,
            "fresh-permission": fresh_permission,
            "restore-permission": restore_permission,
        }[args.mode]
        return asyncio.run(mode(args.state_dir))
    except (TimeoutError, Exception) as exc:  # noqa: BLE001 - the test reads the reason
        emit("error", message=f"{type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
