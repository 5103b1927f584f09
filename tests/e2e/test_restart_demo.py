"""Restart end to end on the demo agent: SIGKILL the app mid-turn, start it again, resend.

The driver (restart_driver.py) is a real app process: SessionManager + persistence + the demo
agent on a temporary state dir. Nothing here sleeps as evidence: every wait polls a
condition or reads the driver's next line, with a deadline.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.commands.replay import run_trace
from polypilot_tui.storage.lock import lock_holder

DRIVER_MODULE = "tests.e2e.restart_driver"  # run as a module of the checkout: it imports tests.support
POLYPILOT = Path(sys.executable).with_name("polypilot")
ROOT = Path(__file__).parents[2]

pytestmark = pytest.mark.timeout(180)


class Driver:
    """A driver process whose JSON lines are read with deadlines."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("POLYPILOT_STATE_DIR", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", DRIVER_MODULE, *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr or []), daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout or []:
            self.lines.put(line)
        self.lines.put(None)

    def expect(self, key: str, seconds: float) -> dict[str, Any]:
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(0.01, left))
            except queue.Empty:
                pytest.fail(f"driver said no {key!r} within {seconds:.0f} s; stderr:\n{''.join(self.stderr)[-3000:]}")
            if line is None:
                self.proc.wait(10)
                pytest.fail(f"driver exited ({self.proc.returncode}) before {key!r}:\n{''.join(self.stderr)[-3000:]}")
            obj = json.loads(line)
            if "error" in obj:
                pytest.fail(f"driver error: {obj['error']}\n{''.join(self.stderr)[-3000:]}")
            if key in obj:
                return obj[key]  # type: ignore[no-any-return]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def written_through(state: Path, sid: str) -> tuple[list[tuple[str, str, bool]], str]:
    """History rows and the streaming draft the killed process left in history.db."""
    conn = sqlite3.connect(f"file:{state / 'history.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT kind, text, interrupted FROM items WHERE session_id=? ORDER BY idx", (sid,)
        ).fetchall()
        draft = conn.execute("SELECT text FROM drafts WHERE session_id=?", (sid,)).fetchone()
    finally:
        conn.close()
    return [(k, t, bool(i)) for k, t, i in rows], draft[0] if draft else ""


def as_rows(history: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    return [(h["kind"], h["text"], h["interrupted"]) for h in history]


async def test_sigkill_mid_turn_then_restore_and_resend(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = Driver("fresh", str(state))
    try:
        ready = first.expect("ready", 40)
    finally:
        first.kill()  # mid-turn: !slow streams for ~30 s
    assert first.proc.returncode == -signal.SIGKILL
    sid = ready["session_id"]

    rows, draft = written_through(state, sid)
    assert rows == as_rows(ready["history"])  # the user's prompt, written through before the kill
    assert draft.startswith(ready["draft"]) and len(draft.split()) >= 6  # the reply streamed so far
    recorded = Path(ready["recording"]).read_text().splitlines()
    assert sum('"assistant.message_delta"' in line for line in recorded) >= 6
    registry = json.loads((state / "sessions.json").read_text())
    [saved] = registry["sessions"]
    assert saved["turn_in_flight"] and saved["last_prompt"] == "!slow"
    assert lock_holder(state) is None  # the killed app's lock went with it: status says nothing runs

    second = Driver("restore", str(state), "--resend")
    try:
        restored = second.expect("restored", 30)
        assert restored["session_id"] == sid and restored["mid_turn"]
        assert restored["agent_session_id"] == saved["agent_session_id"]  # resumed, not replaced
        history = as_rows(restored["history"])
        assert history[: len(rows)] == rows  # everything written through is back
        assert history[len(rows)] == ("assistant", draft, True)  # the partial reply, marked interrupted

        outcome = second.expect("outcome", 45)
        assert outcome["seconds"] <= 35  # resumed or reported interrupted within the quiescence tier
        assert outcome["outcome"] == "failed" and outcome["status"] == "error"
        assert outcome["interrupted_prompt"] == "!slow"
        assert any(
            h["kind"] == "error" and "interrupted by a restart of polypilot" in h["text"] for h in outcome["history"]
        )

        resent = second.expect("resent", 45)
        assert resent["ok"] and resent["outcome"] == "completed" and resent["status"] == "idle"
        final = resent["history"][-1]
        assert final["kind"] == "assistant" and not final["interrupted"]
        assert final["text"].split() == [f"word{i}" for i in range(60)]
        closed = second.expect("closed", 30)
        assert second.proc.wait(30) == 0
    finally:
        second.kill()

    # After a clean exit the registry says idle, and the second run's recording replays the
    # restore: the lost turn is reported as failed, the resend completes.
    status = subprocess.run(
        [str(POLYPILOT), "status", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "POLYPILOT_STATE_DIR": str(state)},
        check=True,
    )
    doc = json.loads(status.stdout)
    assert doc["app_running"] is False
    assert [(s["id"], s["status"], s["interrupted"]) for s in doc["sessions"]] == [(sid, "idle", False)]
    trace = Path(closed["recording"]).read_text().splitlines()
    assert json.loads(trace[0])["restore"] == {
        "mid_turn": True,
        "prompt": "!slow",
        "interrupted_tool": False,
        "still_processing": False,
        "lost_turn": True,
    }
    replayed = await run_trace(trace)
    assert [t["turn_end"] for t in replayed.timeline if "turn_end" in t] == ["failed", "completed"]
