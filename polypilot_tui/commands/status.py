"""``polypilot status [--json]``: the sessions' status, without the TUI.

With an engine running it asks the engine (its views are the truth; a turn in flight is
busy there); otherwise it reads ``sessions.json``: no agent starts and nothing is written. The rows use the
names of :class:`~polypilot_tui.domain.view.SessionView` (the sidebar's model) so scripts can
treat both alike; times are epoch seconds here because they outlive the process.

Whether an app runs is read from the state folder's lock (never from the registry, which
another app may have written): if none holds it, a session saved mid-turn is not
"thinking" any more: it is shown ``disconnected`` with the reason, never as busy. Every
text of the document goes through the redactor at once (:meth:`Redactor.scrub`), fed with
the environment's and the agents' secrets.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, TextIO

from polypilot_tui.agents.catalog import load_catalog
from polypilot_tui.config import AgentsFileError, Settings
from polypilot_tui.domain.failures import Failure
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.text import compact_duration, one_line
from polypilot_tui.domain.view import SessionStatus, SessionView, derive_failure
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.verbs import SESSIONS, NoArgs
from polypilot_tui.infra import event_loop
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.service.address import socket_path
from polypilot_tui.service.client import EngineClient
from polypilot_tui.service.spawn import engine_info
from polypilot_tui.storage.lock import lock_holder
from polypilot_tui.storage.registry import Registry, SessionRecord

EXIT_OK = 0

NOT_RUNNING = "the app is not running; the turn in flight resumes or is reported interrupted at the next start"


def status_row(record: SessionRecord, app_running: bool, sign_in: str = "") -> dict[str, Any]:
    """One session in the sidebar's terms (a SessionView-compatible subset); ``sign_in`` is how
    its agent is signed in (the fix a refused sign-in names)."""
    try:
        status = SessionStatus(record.status)
    except ValueError:
        status = SessionStatus.IDLE
    reason = record.reason
    if not app_running and (status.busy or status is SessionStatus.CONNECTING or record.turn_in_flight):
        status, reason = SessionStatus.DISCONNECTED, NOT_RUNNING
    elif record.interrupted_prompt and not reason:
        reason = "a turn was interrupted by a restart; resend it from the dashboard"
    return {
        "id": record.id,
        "name": record.name,
        "agent": record.agent,
        "status": status.value,
        "reason": reason,
        "model": record.model,
        "cwd": record.cwd,
        "branch": record.branch,
        "worktree": record.isolation == "worktree",
        "title": record.title,
        "agent_session_id": record.agent_session_id,
        "last_activity_at": record.last_activity_at,
        "created_at": record.created_at,
        "busy": status.busy,
        "needs_user": status.needs_user,
        "turn_in_flight": record.turn_in_flight and app_running,
        "interrupted": bool(record.interrupted_prompt) or (record.turn_in_flight and not app_running),
        "usage": record.usage.to_json(),
        "failure": _failure_json(derive_failure(status, reason, sign_in)),
    }


def learn_secrets(settings: Settings) -> dict[str, str]:
    """The redactor learns the environment's and the agents' secrets (a second line of defence:
    what the engine sends and the registry holds was redacted already); returns how each agent
    is signed in, by name."""
    REDACTOR.learn_environment()
    try:
        agents = load_catalog(settings).agents
    except AgentsFileError:
        return {}
    REDACTOR.learn_agents(agents.values())
    return {name: agent.sign_in for name, agent in agents.items()}


def status_document(settings: Settings) -> dict[str, Any]:
    """The whole ``--json`` document (prompts are never included: they may hold secrets)."""
    sign_ins = learn_secrets(settings)
    holder = lock_holder(Path(settings.state_dir))
    snapshot = Registry(Path(settings.state_dir)).load(repair=False)
    running = holder is not None
    doc: dict[str, Any] = {
        "state_dir": str(settings.state_dir),
        "app_running": running,
        "app_pid": holder.pid if holder is not None else None,
        "saved_at": snapshot.saved_at,
        "sessions": [status_row(r, running, sign_ins.get(r.agent, "")) for r in snapshot.sessions],
    }
    if snapshot.problem:
        doc["problem"] = snapshot.problem
    return doc


def _ago(then: float | None, now: float) -> str:
    if then is None:
        return "-"
    return f"{compact_duration(now - then)} ago"


def format_table(doc: dict[str, Any], now: float) -> str:
    """Human form: one line per session."""
    sessions = doc["sessions"]
    head = f"{len(sessions)} session(s) in {doc['state_dir']}"
    running = "the engine" if doc.get("engine") else "the app"
    head += f" ({running} runs as pid {doc['app_pid']})" if doc["app_running"] else " (the app is not running)"
    if doc.get("problem"):
        head += f"\nwarning: {doc['problem']}"
    if not sessions:
        return head
    rows = [("ID", "NAME", "AGENT", "STATUS", "LAST ACTIVITY", "MODEL", "REASON")]
    for s in sessions:
        rows.append(
            (
                s["id"],
                one_line(s["name"], 24),
                s["agent"],
                s["failure"]["title"] if s.get("failure") else s["status"],
                _ago(s["last_activity_at"], now),
                s["model"] or "-",
                one_line(s["reason"], 70),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    # The last column (the reason) is not padded: zip stops before it.
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows]
    return head + "\n" + "\n".join(line.rstrip() for line in lines)


def live_row(view: SessionView, record: SessionRecord | None, to_wall: float) -> dict[str, Any]:
    """One session as the running engine shows it, in :func:`status_row`'s shape (``to_wall``
    turns the engine's clock times into epoch seconds)."""
    return {
        "id": view.id,
        "name": view.name,
        "agent": view.agent,
        "status": view.status.value,
        "reason": view.reason,
        "model": view.model,
        "cwd": view.cwd,
        "branch": view.branch,
        "worktree": view.worktree,
        "title": view.title,
        "agent_session_id": view.agent_session_id,
        "last_activity_at": view.last_activity_at + to_wall if view.last_activity_at is not None else None,
        "created_at": record.created_at if record is not None else None,
        "busy": view.status.busy,
        "needs_user": view.status.needs_user,
        "turn_in_flight": view.status.busy,
        "interrupted": bool(view.interrupted_prompt),
        "usage": view.usage.to_json(),
        "failure": _failure_json(view.failure),
    }


def _failure_json(failure: Failure | None) -> dict[str, str] | None:
    """A named failure as the ``--json`` rows carry it (kind, title, fix; the reason is the detail)."""
    return failure.to_json() if failure is not None else None


async def live_document(settings: Settings) -> dict[str, Any] | None:
    """The ``--json`` document from the running engine, or None when none answers."""
    info = await engine_info(settings)
    if info is None:
        return None
    client = EngineClient(socket_path(settings.state_dir), timeout=10.0)
    try:
        listed = await client.call(SESSIONS, NoArgs())
    except EngineError:
        return None  # it went away meanwhile: the registry tells the rest
    finally:
        await client.aclose()
    learn_secrets(settings)
    snapshot = Registry(Path(settings.state_dir)).load(repair=False)
    records = {r.id: r for r in snapshot.sessions}
    to_wall = info.wall - info.now
    return {
        "state_dir": str(settings.state_dir),
        "app_running": True,
        "app_pid": info.pid,
        "saved_at": snapshot.saved_at,
        "engine": True,
        "sessions": [live_row(v, records.get(v.id), to_wall) for v in listed.sessions],
    }


def print_status(settings: Settings, json_mode: bool = False, out: TextIO | None = None) -> int:
    """Print the status model (the running engine's, else the registry's); exit 0 (an empty or
    missing registry is not an error)."""
    out = out or sys.stdout
    live = event_loop.run(live_document(settings)) if socket_path(settings.state_dir).exists() else None
    doc = REDACTOR.scrub(live or status_document(settings))  # every text of every row
    if json_mode:
        out.write(dump_json(doc, indent=2) + "\n")
    else:
        out.write(format_table(doc, time.time()) + "\n")
    return EXIT_OK
