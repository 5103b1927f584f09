"""Recordings (recorder.py): replayable traces, size-capped, private, with secrets redacted."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import FakeClock, SystemClock
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.records import ActionTaken, EngineAction, Record, SessionAdded, ViewChanged
from polypilot_tui.domain.trace import parse_trace
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.recorder import Recorder
from polypilot_tui.infra.redact import REDACTED, REDACTOR, Redactor, is_secret_key
from tests.support.waiting import until

POLYPILOT = Path(sys.executable).with_name("polypilot")


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def recorder(tmp_path: Path, max_bytes: int = 1_000_000) -> tuple[Recorder, FakeClock]:
    clock = FakeClock()
    return Recorder(tmp_path / "recordings", clock, max_bytes), clock


def act(
    rec: Recorder, sid: str, action: EngineAction, *, by_user: bool = True, reason: str = "", prompt: str = ""
) -> None:
    """What the engine says it did, as the record stream carries it."""
    rec.on_record(ActionTaken(sid, action, reason, prompt=prompt, by_user=by_user))


# ---- format and files ----------------------------------------------------------------
async def test_recording_is_a_trace_with_relative_times(tmp_path: Path) -> None:
    rec, clock = recorder(tmp_path)
    await clock.advance(100)
    act(rec, "s1", EngineAction.SEND, prompt="hello")
    await clock.advance(1.5)
    rec.on_event("s1", AgentEvent("assistant.turn_start", {"turnId": "t1"}))
    await clock.advance(2)
    act(rec, "s1", EngineAction.ABORT, reason="stopped by user")
    act(rec, "s1", EngineAction.RECONNECT)
    act(rec, "s1", EngineAction.ABORT, reason="no events for 120 s", by_user=False)
    rec.close()
    path = rec.path("s1")
    assert path is not None and path.name.startswith("s1-") and path.suffix == ".jsonl"
    entries = parse_trace(lines(path))
    assert [(e.at, e.action) for e in entries] == [(0.0, "send"), (1.5, "event"), (3.5, "stop"), (3.5, "reconnect")]
    assert lines(path)[-1].startswith("# 3.500 abort: no events for 120 s")  # the watchdog's: a comment
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


async def test_restored_session_starts_with_a_restore_line(tmp_path: Path) -> None:
    rec, clock = recorder(tmp_path)
    rec.on_record(SessionAdded("s1", restored=True))
    await clock.advance(5)
    act(rec, "s1", EngineAction.SEND, prompt="again")
    entries = parse_trace(lines(rec.path("s1")))  # type: ignore[arg-type]
    assert entries[0].action == "restore" and entries[0].value == {"mid_turn": False}
    assert (entries[1].at, entries[1].value) == (5.0, "again")


async def test_cap_writes_one_marker_and_stops(tmp_path: Path) -> None:
    rec, _ = recorder(tmp_path, max_bytes=2_000)
    for i in range(200):
        rec.on_event("s1", AgentEvent("assistant.message_delta", {"deltaContent": f"word{i} " * 3}))
    path = rec.path("s1")
    assert path is not None
    text = path.read_text()
    body, marker = text.rstrip("\n").rsplit("\n", 1)
    assert marker == f"# recording stopped at {len((body + chr(10)).encode())} bytes"
    assert len(body) + 1 <= 2_000
    assert text.count("# recording stopped") == 1
    parse_trace(text.splitlines())  # still a valid trace


# ---- redaction ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "key",
    [
        "GITHUB_TOKEN",
        "OPENAI_API_KEY",
        "authorization",
        "Authorization",
        "apiKey",
        "accessToken",
        "password",
        "client_secret",
        "x-api-key",
        "MY_SERVICE_SECRET",
    ],
)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key", ["tokenLimit", "currentTokens", "inputTokens", "content", "deltaContent", "toolName", "keyboard", "monkey"]
)
def test_ordinary_keys(key: str) -> None:
    assert not is_secret_key(key)


@pytest.mark.parametrize(
    "text",
    [
        "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz && make",
        'curl -H "Authorization: Bearer abcdefghijklmnop1234" https://x',
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 leaked",
        "GITHUB_TOKEN: 'github_pat_11ABCDEFG0123456789_abcdefghijk'",
    ],
)
def test_secret_text_is_redacted(text: str) -> None:
    out = REDACTOR.text(text)
    assert REDACTED in out
    for secret in ("sk-proj-abc", "abcdefghijklmnop1234", "ghp_abc", "github_pat_11"):
        assert secret not in out


async def test_secrets_never_reach_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_DEPLOY_TOKEN", "s3cr3t-value-from-env")
    rec, _ = recorder(tmp_path)
    rec.on_event(
        "s1",
        AgentEvent(
            "tool.execution_start",
            {
                "toolName": "bash",
                "toolCallId": "c1",
                "arguments": {"command": "echo s3cr3t-value-from-env", "env": {"GITHUB_TOKEN": "ghp_" + "a" * 36}},
                "headers": {"Authorization": "Basic dXNlcjpwYXNz"},
                "apiKey": "k-123456789",
            },
        ),
    )
    rec.on_event("s1", AgentEvent("session.usage_info", {"currentTokens": 1200, "tokenLimit": 128000}))
    act(rec, "s1", EngineAction.SEND, prompt="use OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx please")
    text = rec.path("s1").read_text()  # type: ignore[union-attr]
    for secret in ("s3cr3t-value-from-env", "ghp_aaaa", "dXNlcjpwYXNz", "k-123456789", "sk-abcdefghij"):
        assert secret not in text
    entries = parse_trace(text.splitlines())
    assert entries[0].event.data["arguments"]["env"]["GITHUB_TOKEN"] == REDACTED
    assert entries[0].event.data["toolName"] == "bash"
    assert entries[1].event.data == {"currentTokens": 1200, "tokenLimit": 128000}


def test_redactor_leaves_ordinary_data_alone() -> None:
    data = {"content": "Here is the plan.", "items": [1, 2.5, None, True], "nested": {"toolName": "grep"}}
    assert Redactor().scrub(data) == data


# ---- a live demo turn replays to the same statuses ---------------------------------------
def watch(manager: SessionManager) -> Callable[[], list[tuple[str, str]]]:
    """Status changes as ``polypilot replay`` reports them: (status, reason), deduplicated."""
    seen: list[tuple[str, str]] = []

    def on_change(change: Record) -> None:
        sid = change.session_id
        if sid in manager.ids():
            view = manager.view(sid)
            item = (view.status.value, view.reason)
            if not seen or seen[-1] != item:
                seen.append(item)

    manager.subscribe(on_change, ViewChanged)
    return lambda: seen


def replay_statuses(path: Path) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    out = subprocess.run(
        [str(POLYPILOT), "replay", "--json", str(path)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    timeline = [json.loads(line) for line in out.splitlines()]
    return ([(t["status"], t["reason"]) for t in timeline if "status" in t], [t for t in timeline if "turn_end" in t])


async def live_run(tmp_path: Path, script: Callable[[SessionManager, str], Any]) -> tuple[Path, list[tuple[str, str]]]:
    settings = Settings.read(None, state_dir=tmp_path, demo_speed=5.0)
    manager = SessionManager(settings, load_agents(None), SystemClock())
    rec = Recorder(tmp_path / "recordings", manager.clock, 1_000_000)
    rec.attach(manager)
    statuses = watch(manager)
    sid = manager.add_session("demo", "live")
    await script(manager, sid)
    await manager.idle()
    await manager.shutdown()
    rec.close()
    path = rec.path(sid)
    assert path is not None
    return path, statuses()


async def test_demo_tool_turn_replays_to_the_same_statuses(tmp_path: Path) -> None:
    async def script(manager: SessionManager, sid: str) -> None:
        await until(lambda: manager.session(sid).connected, 10)
        await manager.send(sid, "look at the project and run the tests")
        await until(lambda: bool(manager.session(sid).turns), 20)

    path, live = await live_run(tmp_path, script)
    replayed, turns = replay_statuses(path)
    assert [s for s, _ in live].count("working") >= 1
    assert replayed == live
    assert [t["turn_end"] for t in turns] == ["completed"]


async def test_demo_stop_replays_to_the_same_statuses(tmp_path: Path) -> None:
    async def script(manager: SessionManager, sid: str) -> None:
        await until(lambda: manager.session(sid).connected, 10)
        await manager.send(sid, "!slow")
        await until(lambda: manager.streaming_text(sid).count("word") >= 3, 20)
        await manager.stop(sid)

    path, live = await live_run(tmp_path, script)
    assert any('"stop"' in line for line in lines(path))
    replayed, turns = replay_statuses(path)
    assert replayed == live
    assert [t["turn_end"] for t in turns] == ["aborted"]


async def test_nothing_is_written_after_close(tmp_path: Path) -> None:
    rec, _ = recorder(tmp_path)
    act(rec, "s1", EngineAction.SEND, prompt="hi")
    rec.close()
    rec.on_event("s1", AgentEvent("session.idle", {}))
    rec.on_event("s2", AgentEvent("session.idle", {}))
    assert len(lines(rec.path("s1"))) == 1  # type: ignore[arg-type]
    assert rec.path("s2") is None


def test_a_key_in_a_plainly_named_variable_is_still_redacted(tmp_path: Path, monkeypatch) -> None:
    """api_key_env may name any variable (LLM_ACCESS): its value never reaches a recording."""
    from polypilot_tui.config import AgentConfig, ProviderConfig
    from polypilot_tui.domain.clock import FakeClock

    monkeypatch.setenv("LLM_ACCESS", "plain-looking-credential-123456")
    REDACTOR.learn_agents(
        [
            AgentConfig(
                name="x",
                kind="acp",
                command="x",
                provider=ProviderConfig(base_url="http://127.0.0.1:9/v1", api_key_env="LLM_ACCESS"),
            )
        ]
    )  # what the app does at start
    rec = Recorder(tmp_path / "rec", FakeClock(), 1_000_000)
    rec.on_event(
        "s1",
        AgentEvent(
            "tool.execution_complete",
            {"toolCallId": "c", "success": True, "result": {"content": "LLM_ACCESS=plain-looking-credential-123456"}},
        ),
    )
    text = rec.path("s1").read_text()  # type: ignore[union-attr]
    assert "plain-looking-credential-123456" not in text and "[redacted]" in text
