"""Issue #11.5: settings and files that used to hang or break the app.

``POLYPILOT_HEARTBEAT_SECONDS=nan`` (or ``1e-6``) passed validation and the dashboard spun
at 100% CPU without ever drawing; a NaN watchdog tier failed every turn; a watchdog table
that is not JSON printed a traceback; NaN in sessions.json crashed ``status`` and was
written back; deep nesting raised RecursionError; a 4000-digit trace time and a
million-line trace ended in a traceback or took minutes. Each now gets a clear error that
names the field, the file and the line, and nothing that can be saved is lost.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import Persistence
from polypilot_tui.ui.keymap import load_keymap
from polypilot_tui.ui.theming import ThemeFileError, load_theme_file
from tests.reliability.conftest import clean_env, polypilot


@pytest.mark.parametrize(
    ("name", "value", "field"),
    [
        ("POLYPILOT_HEARTBEAT_SECONDS", "nan", "heartbeat_seconds"),
        ("POLYPILOT_HEARTBEAT_SECONDS", "1e-6", "heartbeat_seconds"),
        ("POLYPILOT_HEARTBEAT_SECONDS", "inf", "heartbeat_seconds"),
        ("POLYPILOT_WATCHDOG__INACTIVITY", "nan", "watchdog.inactivity"),
        ("POLYPILOT_WATCHDOG__INACTIVITY", "1e308", "watchdog.inactivity"),
        ("POLYPILOT_WATCHDOG__MAX_TURN", "-inf", "watchdog.max_turn"),
        ("POLYPILOT_STOP_GRACE_SECONDS", "0", "stop_grace_seconds"),
        ("POLYPILOT_RECORD_MAX_BYTES", "99999999999999", "record_max_bytes"),
        ("POLYPILOT_DEMO_SPEED", "nan", "demo_speed"),
        ("POLYPILOT_WATCHDOG", "{", "watchdog: not valid JSON"),
    ],
)
def test_the_dashboard_refuses_a_setting_that_would_hang_or_break_it_and_names_it(
    tmp_path: Path, name: str, value: str, field: str
) -> None:
    env = clean_env(tmp_path / "state", **{name: value})
    began = time.monotonic()
    done = polypilot(env, timeout=60)  # the dashboard itself: it must stop before drawing
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    assert "invalid setting" in done.stderr and field in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "\x1b[" not in done.stdout
    assert time.monotonic() - began < 30  # a hang guard, not a performance target


def test_a_refused_setting_never_prints_a_secret_it_was_given(tmp_path: Path) -> None:
    # msgspec's message repeats a refused choice (pydantic's did not): a key pasted into the
    # wrong variable, or the value of a secret-named one, must not reach the terminal or a CI log.
    key = "sk-proj-ABCDEF1234567890abcdef"
    env = clean_env(tmp_path / "state", POLYPILOT_PERMISSION_POLICY=key)
    done = polypilot(env, "status", timeout=60)
    assert done.returncode == 2 and "permission_policy" in done.stderr, done.stderr
    assert key not in done.stderr, done.stderr
    secret = "not-shaped-like-a-key-42"
    env = clean_env(tmp_path / "state", POLYPILOT_NOTIFICATIONS=secret, MY_MODEL_API_KEY=secret)
    done = polypilot(env, "status", timeout=60)
    assert done.returncode == 2 and "notifications" in done.stderr, done.stderr
    assert secret not in done.stderr, done.stderr


def nan_registry(state: Path) -> None:
    state.mkdir(mode=0o700, parents=True)
    (state / "sessions.json").write_text(
        '{"version": 1, "saved_at": NaN, "sessions": ['
        '{"id": "a", "name": "alpha", "agent": "demo", "created_at": Infinity, "last_activity_at": NaN},'
        '{"id": "b", "name": "beta", "agent": "demo", "created_at": -Infinity, "last_activity_at": 1e400}]}'
    )


def test_status_reads_nan_and_infinity_and_prints_strict_json(tmp_path: Path) -> None:
    state = tmp_path / "state"
    nan_registry(state)
    done = polypilot(clean_env(state), "status", "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    doc = json.loads(done.stdout, parse_constant=lambda c: pytest.fail(f"{c} in status --json"))
    assert [s["name"] for s in doc["sessions"]] == ["alpha", "beta"]
    assert all(s["last_activity_at"] is None for s in doc["sessions"])
    text = polypilot(clean_env(state), "status")
    assert text.returncode == 0 and "alpha" in text.stdout and "beta" in text.stdout


async def test_nan_and_infinity_are_never_written_back(tmp_path: Path) -> None:
    state = tmp_path / "state"
    nan_registry(state)
    settings = Settings.read(None, state_dir=state, record=False)
    manager = SessionManager(settings, load_agents(None), SystemClock())
    persistence = Persistence(manager, settings, registry_delay=0.05)
    assert persistence.start().ids == ["a", "b"]  # the sessions survive; only the bad numbers go
    manager.rename("a", "renamed")  # a change, so the registry is written again
    await asyncio.sleep(0.3)
    await manager.shutdown()
    await persistence.close()
    text = (state / "sessions.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} written to sessions.json"))
    assert "renamed" in text


def test_deep_nesting_in_the_agents_file_names_the_file_and_line(tmp_path: Path) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text('[fake]\nkind = "acp"\ncommand = "x"\nargs = ' + "[" * 5000 + "]" * 5000 + "\n")
    done = polypilot(clean_env(tmp_path / "state"), "--agents-file", str(agents), "agents")
    assert done.returncode == 2, done.stderr
    assert str(agents) in done.stderr and "line 4" in done.stderr and "nested deeper" in done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr


def test_deep_nesting_in_a_theme_file_names_the_file_and_line(tmp_path: Path) -> None:
    theme = tmp_path / "deep.toml"
    theme.write_text('primary = "#ff0000"\n\n[variables]\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ThemeFileError) as info:
        load_theme_file(theme)
    assert str(theme) in str(info.value) and "line 4" in str(info.value) and "nested deeper" in str(info.value)


def test_deep_nesting_in_sessions_json_is_a_clear_status_warning(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "sessions.json").write_text('{"sessions": [\n' + "[" * 100_000 + "]" * 100_000 + "]}")
    done = polypilot(clean_env(state), "status", "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    problem = json.loads(done.stdout)["problem"]
    assert str(state / "sessions.json") in problem and "line 2" in problem and "nested deeper" in problem
    assert (state / "sessions.json").exists()  # status reads only: the app moves it aside, not status


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"at": ' + "9" * 4000 + ', "send": "x"}\n', "line 2: 'at' must be a number of seconds"),
        ('{"at": 1e40, "send": "x"}\n', "line 2: 'at' must be a number of seconds from 0 to"),
    ],
    ids=["4000-digit-at", "1e40-at"],
)
def test_a_trace_time_no_clock_can_hold_is_a_clear_error(tmp_path: Path, content: str, expected: str) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"at": 0, "send": "hi"}\n' + content)
    done = polypilot(clean_env(tmp_path / "state"), "replay", str(trace))
    assert done.returncode == 2 and expected in done.stderr and str(trace) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_million_line_trace_is_refused_quickly_with_the_limit(tmp_path: Path) -> None:
    trace = tmp_path / "huge.jsonl"
    trace.write_text('{"at": 0, "send": "hi"}\n' + '{"at":1,"stop":{}}\n' * 1_000_000)  # 19 MB: within the byte limit
    began = time.monotonic()
    done = polypilot(clean_env(tmp_path / "state"), "replay", str(trace), timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "more than 100,000 entries" in done.stderr and str(trace) in done.stderr
    assert time.monotonic() - began < 60  # it took 176 s and 770 MB; a hang guard, not a target


def test_a_trace_file_beyond_the_byte_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    trace = tmp_path / "sparse.jsonl"
    with open(trace, "wb") as fh:
        fh.truncate(100_000_000)  # sparse: costs no disk, and no reader should walk it
    done = polypilot(clean_env(tmp_path / "state"), "replay", str(trace))
    assert done.returncode == 2 and "traces are limited to 64,000,000 bytes" in done.stderr, done.stderr


def test_deep_nesting_in_the_keymap_file_names_the_file_and_line(tmp_path: Path) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('stop = "ctrl+t"\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    assert load_keymap(keymap) == ({}, f"{keymap}: line 2: nested deeper than 64 levels")
