"""The commands' rough edges a new user met (real subprocesses, real pipes, a real agent process):

- ``polypilot run --json … | head`` printed a BrokenPipeError traceback, and the turn ran on
  to its end for nobody: a closed stdout now stops the turn and ends the command quietly
  with 141 (128 + SIGPIPE), the other commands too;
- plain ``run`` output began with an empty line when the turn began with a tool, and ended
  with one after a tool line;
- ``polypilot agents`` said ``ready`` when the variable a provider's ``api_key_env`` names
  was unset (an empty key was then passed on): it now says ``no key`` naming the variable,
  ``run`` refuses to start with the same sentence, and the dashboard says so at start.
"""

from __future__ import annotations

import io
import os
import subprocess
import time
from pathlib import Path

import pytest

from polypilot_tui.commands.output import EXIT_STDOUT_CLOSED, Output
from polypilot_tui.config import Settings
from tests.reliability.conftest import POLYPILOT, ROOT, clean_env, descendants, fake_agents_file, polypilot
from tests.support.processes import alive
from tests.support.waiting import until_blocking

KEY_ENV = "POLYPILOT_QA_PROVIDER_KEY"


def closed_stdout(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a command whose stdout is a pipe nobody reads from any more (closed before it starts)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [*POLYPILOT, *args],
            cwd=ROOT,
            env=env,
            stdout=write,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
        )
    finally:
        os.close(write)


# ---- a closed stdout ----------------------------------------------------------------------
def test_run_into_head_stops_the_turn_and_exits_141_without_a_traceback(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "state")
    run = subprocess.Popen(
        [*POLYPILOT, "run", "--json", "!hang"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    head = subprocess.Popen(["head", "-c", "20"], stdin=run.stdout, stdout=subprocess.PIPE, text=True)
    assert run.stdout is not None and run.stderr is not None
    run.stdout.close()  # head holds the only reading end, as in a shell pipeline
    began = time.monotonic()
    try:
        code = run.wait(60)  # the hanging turn would otherwise last until the watchdog gives up (120 s)
        took = time.monotonic() - began
        shown, _ = head.communicate(timeout=10)
        stderr = run.stderr.read()
    finally:
        for proc in (run, head):
            if proc.poll() is None:
                proc.kill()
    assert shown == '{"type": "session.st'
    assert code == EXIT_STDOUT_CLOSED and stderr == "", stderr
    assert took < 15, f"the turn ran on for {took:.1f} s after its reader left"


def test_a_reader_leaving_while_the_turn_is_quiet_is_noticed_without_a_write(tmp_path: Path) -> None:
    """Everything was written before the reader left and the turn hangs: nothing more is ever
    written, so no failed write can tell — the pipe's closed end must (it had waited 120 s)."""
    run = subprocess.Popen(
        [*POLYPILOT, "run", "--json", "!hang"],
        cwd=ROOT,
        env=clean_env(tmp_path / "state"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert run.stdout is not None and run.stderr is not None
    try:
        while "assistant.turn_start" not in (line := run.stdout.readline()):  # its last word: it hangs here
            assert line, "the run ended before its turn started"
        run.stdout.close()  # the reader leaves with the pipe drained: no write is pending
        began = time.monotonic()
        code = run.wait(60)
        took = time.monotonic() - began
        stderr = run.stderr.read()
    finally:
        if run.poll() is None:
            run.kill()
    assert code == EXIT_STDOUT_CLOSED and stderr == "", stderr
    assert took < 15, f"the turn ran on for {took:.1f} s after its reader left"


def test_run_stops_a_real_agent_when_its_reader_leaves(tmp_path: Path) -> None:
    agents = fake_agents_file(tmp_path / "a.toml", shell="sleep 300 & exec {agent}")  # the agent has a child
    env = clean_env(tmp_path / "state", POLYPILOT_AGENTS_FILE=str(agents))
    run = subprocess.Popen(
        [*POLYPILOT, "run", "--json", "--agent", "fake", "SLOW please"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert run.stdout is not None and run.stderr is not None
    try:
        assert run.stdout.readline()  # the agent is up and in its turn
        agent = descendants(run.pid)
        assert len(agent) >= 2, agent
        run.stdout.close()
        assert run.wait(60) == EXIT_STDOUT_CLOSED
        stderr = run.stderr.read()
    finally:
        if run.poll() is None:
            run.kill()
    assert "Traceback" not in stderr and stderr == "", stderr
    until_blocking(lambda: not any(alive(p) for p in agent), 10, "the agent to end with the run")


@pytest.mark.parametrize(
    "args",
    [
        ("status",),
        ("status", "--json"),
        ("agents",),
        ("replay", str(ROOT / "tests" / "traces" / "pr230_usage_flood.jsonl")),
        ("run", "hello"),
    ],
)
def test_every_command_ends_quietly_when_stdout_is_closed(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = closed_stdout(clean_env(tmp_path / "state"), *args)
    assert done.returncode == EXIT_STDOUT_CLOSED and done.stderr == "", done.stderr


def test_output_tells_once_that_its_reader_left_and_writes_nothing_more() -> None:
    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    told: list[str] = []
    out = Output(Gone(), on_closed=lambda: told.append("closed"))
    out.write("a")
    out.line("b")
    out.end_line()
    assert out.closed and told == ["closed"]


# ---- plain output lines ---------------------------------------------------------------------
def test_lines_of_their_own_start_a_line_only_when_one_is_open() -> None:
    stream = io.StringIO()
    out = Output(stream)
    out.line("[tool bash] {}")  # first thing written: no empty line before it
    out.line("[tool ok]")
    out.write("Done")
    out.line("[tool bash] {}")
    out.write("Finished.\n")
    out.end_line()  # nothing open: no empty line at the end
    assert stream.getvalue() == "[tool bash] {}\n[tool ok]\nDone\n[tool bash] {}\nFinished.\n"


def test_plain_run_output_has_no_empty_first_or_last_line(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "state", POLYPILOT_AGENTS_FILE=str(fake_agents_file(tmp_path / "a.toml")))
    done = polypilot(env, "run", "--allow-tools", "--agent", "fake", "TOOL now")  # it reads the repo's README
    assert done.returncode == 0, done.stderr[-2000:]
    shown = f"{done.stdout[:200]!r} … {done.stdout[-100:]!r}"
    assert done.stdout.startswith("[tool bash] ") and "[tool ok]\n" in done.stdout, shown
    assert not done.stdout.endswith("\n\n"), shown
    demo = polypilot(clean_env(tmp_path / "state2"), "run", "hello")
    assert demo.returncode == 0 and demo.stdout.startswith("You said: ") and demo.stdout.endswith(".\n")


# ---- a provider key that is not there -------------------------------------------------------
def test_agents_says_no_key_naming_the_variable_and_run_refuses_with_the_same_sentence(tmp_path: Path) -> None:
    agents = fake_agents_file(tmp_path / "a.toml", api_key_env=KEY_ENV)
    env = clean_env(tmp_path / "state", POLYPILOT_AGENTS_FILE=str(agents))
    env.pop(KEY_ENV, None)
    listed = polypilot(env, "agents")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()}
    sentence = f"the provider key variable {KEY_ENV} is not set (api_key_env)"
    assert rows["fake"].split()[2:4] == ["no", "key"] and rows["fake"].endswith(sentence), rows["fake"]
    assert rows["demo"].split()[2] == "ready"

    refused = polypilot(env, "run", "--agent", "fake", "hello")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip() == f"polypilot run: agent 'fake' cannot start: {sentence}"

    for value in ("", "   "):  # set but empty counts as unset; spaces are a value (the provider judges it)
        env[KEY_ENV] = value
        row = polypilot(env, "agents").stdout.splitlines()[-1]
        assert ("no key" in row) == (value == ""), row

    key = "sk-qa-4f1e9a0c7b2d"
    env[KEY_ENV] = key
    ready = polypilot(env, "agents")
    assert ready.stdout.splitlines()[-1].split()[2] == "ready" and key not in ready.stdout + ready.stderr


def test_a_key_in_the_agents_env_table_counts_and_the_dashboard_says_when_it_is_missing(tmp_path: Path) -> None:
    from polypilot_tui.ui.launch import build_catalog

    without = fake_agents_file(tmp_path / "without.toml", api_key_env=KEY_ENV)
    with_env = fake_agents_file(tmp_path / "with.toml", api_key_env=KEY_ENV, env={KEY_ENV: "from-the-table"})
    os.environ.pop(KEY_ENV, None)
    catalog, notes = build_catalog(Settings.read(None, state_dir=tmp_path, agents_file=without))
    assert notes == [f"Agent 'fake' is not ready: the provider key variable {KEY_ENV} is not set (api_key_env)"]
    catalog, notes = build_catalog(Settings.read(None, state_dir=tmp_path, agents_file=with_env))
    assert notes == [] and catalog.agents["fake"].missing_key() is None
