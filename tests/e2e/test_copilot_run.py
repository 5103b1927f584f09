"""``polypilot run`` as a subprocess on the real Copilot CLI and the scripted model server.

The agent comes from an agents file (kind ``copilot``, the cached CLI, the model server as
provider, the key named by ``api_key_env`` and set only in the environment). A hung model
must never hang the job: the watchdog ends the turn, the exit code is non-zero, and no CLI
process is left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.copilot_e2e import KEY
from tests.support.copilot_harness import agents_toml, alive, copilot_processes, home_processes, run_env
from tests.support.model_server import ModelServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

POLYPILOT = [sys.executable, "-m", "polypilot_tui"]  # the polypilot command's entry point (entry.py)
ROOT = Path(__file__).parents[2]


@pytest.fixture
def setup(copilot_cli: Path, model_server: ModelServer, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    agents = tmp_path / "agents.toml"
    agents.write_text(agents_toml(copilot_cli, model_server, tmp_path))
    assert KEY not in agents.read_text()  # the key lives in the environment only
    return copilot_cli, run_env(tmp_path / "state", agents)


def run(env: dict[str, str], *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*POLYPILOT, "run", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_tool_prompt_exits_0_with_the_tool_output(setup: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    cli, env = setup
    done = run(env, "--allow-tools", "please TOOL CMD=`echo run-e2e-output`")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[tool bash]" in done.stdout and "[tool ok]" in done.stdout
    assert "done: run-e2e-output" in done.stdout
    assert not home_processes(tmp_path / "copilot-home"), "the CLI or its tool shell outlived the run"


def test_without_allow_tools_the_prompt_is_refused_not_hung(setup: tuple[Path, dict[str, str]]) -> None:
    _, env = setup
    done = run(env, "TOOL now")  # policy ask, no terminal: rejected, the model answers the denial
    assert done.returncode == 3, done.stderr[-3000:]  # completed, but without the tool it needed
    assert "no terminal; rejected" in done.stderr and "[tool failed]" in done.stdout
    assert "1 permission request was refused: " in done.stderr


def test_ctrl_c_stops_the_turn_and_exits_4_with_no_cli_left(setup: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    import signal

    _, env = setup
    proc = subprocess.Popen(
        [*POLYPILOT, "run", "SLOW please"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.read(12)  # the reply is streaming
        assert first.strip(), "no reply streamed"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 4, err[-3000:]
    assert "cancelled by SIGINT" in err and "Traceback" not in err
    assert not home_processes(tmp_path / "copilot-home"), "the CLI outlived the cancelled run"


def test_json_prints_jsonl(setup: tuple[Path, dict[str, str]]) -> None:
    _, env = setup
    done = run(env, "--json", "--allow-tools", "TOOL")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert lines and all(isinstance(obj, dict) for obj in lines)
    types = [obj.get("type") for obj in lines]
    for kind in (
        "user.message",
        "tool.execution_start",
        "tool.execution_complete",
        "assistant.message",
        "session.idle",
    ):
        assert kind in types, f"{kind} missing from {types}"
    assert lines[-1] == {"turn_end": "completed", "reason": "session.idle", "refused_permissions": [], "exit_code": 0}
    biggest = max(done.stdout.splitlines(), key=len)
    assert len(biggest) < 10_000, f"a {len(biggest)}-char JSONL line: {biggest[:200]}"  # not the 43 KB prompt
    assert KEY not in done.stdout


def test_hanging_model_exits_nonzero_within_10s_and_leaves_no_cli(
    setup: tuple[Path, dict[str, str]], model_server: ModelServer, tmp_path: Path
) -> None:
    """On an idle machine the whole run takes ~7.7 s: 5 s tier + SDK import (1.3 s) + CLI
    handshake (1 s) + exit. Start-up is CPU-bound and doubles when another xdist worker
    starts CLIs at the same moment, so the 10 s is held from the moment the model hangs
    (what the watchdog controls) and the whole run gets a loose bound."""
    cli, env = setup
    env = {**env, "POLYPILOT_WATCHDOG__INACTIVITY": "5"}
    began = time.monotonic()
    proc = subprocess.Popen(
        [*POLYPILOT, "run", "HANG forever"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        seen: list[int] = []
        while not seen and proc.poll() is None and time.monotonic() - began < 30:
            seen = copilot_processes(cli, ancestor=proc.pid)  # the detector sees the run's own CLI
            time.sleep(0.05)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    ended = time.monotonic()
    took = ended - began
    assert seen, "never saw the run's Copilot CLI in /proc"
    assert proc.returncode == 1, (proc.returncode, err[-3000:])
    assert "turn stuck" in err, err[-3000:]
    hang = next(r for r in model_server.model_requests() if "HANG" in r.last.text)
    assert ended - hang.at < 8, f"exit came {ended - hang.at:.1f} s after the model hung (tier 5 s)"
    assert took < 20, f"polypilot run took {took:.1f} s with a 5 s inactivity tier"
    assert not any(alive(pid) for pid in seen), "the run's CLI outlived it"
    assert not home_processes(tmp_path / "copilot-home"), "a CLI of this run (or a child) is still alive"


def test_a_closed_model_port_fails_at_once_named_not_after_the_clis_retries(
    setup: tuple[Path, dict[str, str]], model_server: ModelServer, tmp_path: Path
) -> None:
    """The Copilot CLI retries a model server it cannot reach five times over ~23 s (it took
    26 s to fail). At its first failed connection the port is checked: refused, the turn ends
    at once as "model server unreachable", and the CLI's retries are stopped."""
    _, env = setup
    model_server.stop()  # nothing listens on the provider's port any more
    began = time.monotonic()
    done = run(env, "--json", "hello")
    took = time.monotonic() - began
    assert done.returncode == 1, done.stderr[-3000:]
    assert took < 15, f"took {took:.1f} s"  # the CLI's start (~4 s) and one failed call, not its retries
    assert "could not connect to the model server at http://127.0.0.1:" in done.stderr, done.stderr[-3000:]
    assert "connection refused" in done.stderr and "would have retried" in done.stderr
    assert "polypilot run: model server unreachable — fix: " in done.stderr
    retries = [line for line in done.stdout.splitlines() if '"assistant.turn_retry"' in line]
    assert len(retries) <= 1, retries  # stopped at the first failure (the first retry may be on its way)
    assert not home_processes(tmp_path / "copilot-home"), "the CLI outlived the run"
