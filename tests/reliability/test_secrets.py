"""Issue #11.2: secrets never reach disk, and everything the app writes is private.

Four secrets are planted the four ways the app can know them: a secret-named variable of
its environment, the key an agent names with ``api_key_env`` (a plainly named variable),
an agent ``env`` value named like a secret, and one that only looks like a key. Real app
processes (the dashboard's set-up in tests/support/secrets_driver.py, and ``polypilot
run``) then run sessions that echo them, fail with them in tracebacks and stderr, crash,
and are SIGKILLed with them in an unfinished reply, all under umask 000. Every file under
the state folder, and ``status --json``, is then searched for every secret.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

from tests.reliability.conftest import FAKE_AGENT, ROOT, clean_env, files_under, polypilot, toml_string, unique


def agents_file(tmp_path: Path, deploy_token: str, plain_setting: str) -> Path:
    broken_cli = tmp_path / "bin" / "copilot"
    broken_cli.parent.mkdir()
    broken_cli.write_text('#!/bin/sh\necho "copilot: fatal: the provider refused key $LLM_ACCESS" >&2\nexit 1\n')
    broken_cli.chmod(0o755)
    env = {
        "FAKE_ACP_STATE": str(tmp_path / "agent-state"),
        "FAKE_ACP_LEAK": "LLM_ACCESS,DEPLOY_TOKEN,PLAIN_SETTING",
        "DEPLOY_TOKEN": deploy_token,
        "PLAIN_SETTING": plain_setting,
    }
    provider = '{ base_url = "http://127.0.0.1:9/v1", api_key_env = "LLM_ACCESS" }'
    path = tmp_path / "agents.toml"
    path.write_text(
        f'[leaky]\nkind = "acp"\ncommand = {toml_string(sys.executable)}\nargs = [{toml_string(str(FAKE_AGENT))}]\n'
        "env = { " + ", ".join(f"{k} = {toml_string(v)}" for k, v in env.items()) + " }\n"
        f"provider = {provider}\n\n"
        f'[broken-copilot]\nkind = "copilot"\ncommand = {toml_string(str(broken_cli))}\nmodel = "gpt-4.1"\n'
        f"provider = {provider}\n"
    )
    return path


def umask_zero() -> None:
    os.umask(0)


def test_no_planted_secret_reaches_any_file_or_status_after_echoes_failures_and_crashes(tmp_path: Path) -> None:
    secrets = {
        "env": unique("acme-"),
        "api_key_env": unique("llm-"),
        "agent env name": unique("deploy-"),
        "agent env shape": unique("Zq8"),
    }
    state = tmp_path / "state"
    agents = agents_file(tmp_path, secrets["agent env name"], secrets["agent env shape"])
    env = clean_env(
        state,
        ACME_SERVICE_TOKEN=secrets["env"],
        LLM_ACCESS=secrets["api_key_env"],
        POLYPILOT_AGENTS_FILE=str(agents),
        XDG_RUNTIME_DIR=str(tmp_path / "runtime"),
        SECRET_VARS="PLANTED_1,PLANTED_2,PLANTED_3,PLANTED_4",
        **{f"PLANTED_{i}": v for i, v in enumerate(secrets.values(), start=1)},
    )
    driver = [sys.executable, "-m", "tests.support.secrets_driver", str(state), str(agents)]

    app = subprocess.Popen(
        [*driver, "echo"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=umask_zero,
    )
    try:
        line = app.stdout.readline() if app.stdout else ""
        assert line.strip() == "CRASH-ME", (line, app.stderr.read() if app.stderr else "")
        app.send_signal(signal.SIGKILL)  # the crash: the secrets were in a reply still streaming
    finally:
        if app.poll() is None:
            app.kill()
        app.wait(30)
    restored = subprocess.run(
        [*driver, "restore"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, preexec_fn=umask_zero
    )
    assert "RESTORED" in restored.stdout, restored.stderr[-3000:]
    run = subprocess.run(
        [sys.executable, "-m", "polypilot_tui.cli", "run", "--agent", "leaky", "LEAK " + " ".join(secrets.values())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=umask_zero,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 1 and "auth failed" in run.stderr, run.stderr[-3000:]
    status = polypilot(env, "status", "--json")
    assert status.returncode == 0, status.stderr

    files = files_under(state)
    names = {p.relative_to(state).as_posix() for p in files}
    # The sessions really went through every path that could leak.
    assert {"polypilot.log", "run.log", "sessions.json", "history.db"} <= names, names
    assert any(n.endswith("agent-stderr.log") for n in names) and any(n.endswith("acp-transcript.jsonl") for n in names)
    assert any(n.startswith("recordings/") for n in names)
    log = (state / "polypilot.log").read_text()
    assert "Traceback" in log and "[redacted]" in log  # the failing CLI's traceback was logged, redacted
    assert "[redacted]" in (state / "sessions.json").read_text()  # the failure reasons held them
    for path in files:
        data = path.read_bytes()
        for how, secret in secrets.items():
            assert secret.encode() not in data, f"the secret known through {how} is in {path.relative_to(state)}"
            assert secret[:24].encode() not in data, f"a cut of the {how} secret is in {path.relative_to(state)}"
    for how, secret in secrets.items():
        assert secret not in status.stdout and secret not in status.stderr, f"status shows the {how} secret"

    loose = {
        p.relative_to(state).as_posix(): oct(stat.S_IMODE(p.stat().st_mode))
        for p in [state, *state.rglob("*")]
        if stat.S_IMODE(p.stat().st_mode) != (0o700 if p.is_dir() else 0o600)
    }
    assert not loose, f"not private under umask 000: {loose}"


def test_run_creates_the_state_folder_and_its_parents_private(tmp_path: Path) -> None:
    state = tmp_path / "fresh" / "deeper" / "state"  # nothing of it exists yet
    done = subprocess.run(
        [sys.executable, "-m", "polypilot_tui.cli", "run", "--agent", "demo", "FAIL?"],
        cwd=ROOT,
        env=clean_env(state),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=umask_zero,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    for folder in (tmp_path / "fresh", tmp_path / "fresh" / "deeper", state):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder  # it was 0755 (0777 under umask 000)
    assert stat.S_IMODE((state / "run.log").stat().st_mode) == 0o600
