"""bench/_raw_copilot.py, the third side of the headless-run bench: the real Copilot CLI in
SDK mode driven over its stdio with the standard library alone.

Its wall is printed as the floor of ``polypilot run`` (what the CLI's SDK mode costs over
``copilot -p``), so it must serve the same turn the other two sides do — the tool run with
its permission answered, the reply, the session saved as a graceful stop saves it — and
leave nothing running; a driver that skipped part of the turn would report a floor too low.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.headless_run import raw_argv_env
from tests.support.copilot_harness import home_processes
from tests.support.model_server import ModelServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_the_sdk_floor_driver_serves_the_whole_tool_turn_and_saves_the_session(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path
) -> None:
    (tmp_path / "home").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    argv, env = raw_argv_env(copilot_cli, model_server.base_url, tmp_path, work)
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done: hi" in done.stdout  # the tool ran (its output is in the reply): the permission was answered
    assert len(model_server.model_requests()) == 2  # the tool call, then the reply
    logs = list((tmp_path / "copilot-home" / "session-state").glob("*/events.jsonl"))
    assert len(logs) == 1
    kinds = [json.loads(line)["type"] for line in logs[0].read_text().splitlines()]
    assert "tool.execution_complete" in kinds
    assert kinds[-1] == "session.shutdown"  # stopped as the SDK stops it: the session is saved, resumable
    assert not home_processes(tmp_path / "copilot-home"), "the CLI or its tool shell outlived the driver"
