"""Sandboxed sessions in the engine: the agent's default, the refusal when the sandbox cannot
start (at creation and at restore: the agent never starts), the registry keeping the choice,
and the ACP agent (the fake one, a real process) really running in bubblewrap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from acp import RequestError

from polypilot_tui.agents.acp.client import AcpClient
from polypilot_tui.agents.sandbox import plan_for, sandbox_problem
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.failures import FailureKind
from polypilot_tui.domain.sandbox import NO_SANDBOX, Sandbox, SandboxMode
from polypilot_tui.domain.sandbox_refusal import refused_by_sandbox
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.registry_sync import sandbox_of
from polypilot_tui.storage.registry import Registry, SessionRecord
from tests.support.processes import bwrapped, running
from tests.support.waiting import until

FAKE_AGENT = Path(__file__).parents[1] / "support" / "fake_acp_agent.py"
ON = Sandbox(SandboxMode.WORKSPACE)
needs_bwrap = pytest.mark.skipif(sandbox_problem(ON) is not None, reason=f"no sandbox here: {sandbox_problem(ON)}")


def fake(tmp_path: Path, sandbox: str = "workspace") -> AgentConfig:
    state = tmp_path / "agent-state"
    return AgentConfig(
        name="fake",
        kind="acp",
        command=sys.executable,
        args=[str(FAKE_AGENT)],
        env={"FAKE_ACP_STATE": str(state)},
        sandbox=sandbox,  # type: ignore[arg-type]
        sandbox_writable=[str(state)],
    )


def settings_of(tmp_path: Path) -> Settings:
    return Settings.read(None, state_dir=tmp_path / "state", record=False)


@needs_bwrap
async def test_the_agents_default_sandbox_is_taken_and_the_agent_runs_in_bwrap(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    settings = settings_of(tmp_path)
    engine = build_engine(settings, AgentCatalog({"fake": fake(tmp_path)}), persist=False)
    await engine.start()
    try:
        sid = await engine.call(verbs.NEW_SESSION, verbs.NewSession("fake", folder=str(work)))
        assert engine.view(sid).sandbox == ON  # None asked: the agents file's
        details = await engine.call(verbs.DETAILS, verbs.SessionRef(sid))
        assert f"writes: {work}" in details.sandbox_rules
        assert any(line.startswith("hidden: ") and "state" in line for line in details.sandbox_rules)
        await engine.call(verbs.SEND, verbs.Send(sid, "hello"))
        await until(lambda: engine.view(sid).turns >= 1, 30, "the sandboxed agent's reply")
        assert bwrapped(work), "the agent did not run in bubblewrap"
        # The rules it was started with are the session's: a failed tool's text is read
        # against them (a file in a hidden folder reads as missing), and F2 shows them.
        rules = engine.manager.session(sid).sandbox_rules
        assert rules is not None and rules.lines() == details.sandbox_rules
        hidden = Path(settings.state_dir) / "registry.json"
        assert refused_by_sandbox(f"cat: {hidden}: No such file or directory", rules, str(work))
        off = await engine.call(verbs.NEW_SESSION, verbs.NewSession("fake", folder=str(work), sandbox=NO_SANDBOX))
        assert not engine.view(off).sandbox.on
        assert (await engine.call(verbs.DETAILS, verbs.SessionRef(off))).sandbox_rules == ()
    finally:
        await engine.close()
    await until(lambda: not bwrapped(work), 10, "the sandbox to end with its session")


@needs_bwrap
async def test_a_tool_refused_a_hidden_folder_reads_refused_by_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session reads its tools' failures against the rules its agent was started with: a
    file in a hidden folder (a secret in ``~/.ssh``, polypilot's state folder) is missing in
    the sandbox, and that "No such file or directory" is the sandbox's refusal; a file missing
    in the agent's own folder is a plain failure. The agent runs ``cat`` for real in bwrap."""
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("the user's key\n")
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    settings = settings_of(tmp_path)
    engine = build_engine(settings, AgentCatalog({"fake": fake(tmp_path)}), persist=False)
    await engine.start()
    try:
        sid = await engine.call(verbs.NEW_SESSION, verbs.NewSession("fake", folder=str(work)))
        commands = {
            f"cat {home}/.ssh/id_ed25519": "refused",
            f"ls {settings.state_dir}/sessions": "refused",
            f"cat {work}/missing.txt": "failed",
        }
        for turn, command in enumerate(commands, 1):
            await engine.call(verbs.SEND, verbs.Send(sid, f"SHCMD {command}"))
            await until(lambda n=turn: engine.view(sid).turns >= n, 30, f"the turn running {command}")  # type: ignore[misc]
        rows = [item.tool_status for item in engine.history(sid) if item.tool_call_id]
        assert rows == list(commands.values()), [i for i in engine.history(sid) if i.tool_call_id]
        assert not any("the user's key" in item.text for item in engine.history(sid))
    finally:
        await engine.close()


async def test_without_bwrap_no_sandboxed_session_is_made_or_restored_and_no_agent_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    settings = settings_of(tmp_path)
    Path(settings.state_dir).mkdir(mode=0o700)
    Registry(Path(settings.state_dir)).save(
        (SessionRecord("s1", "saved", "fake", cwd=str(work), sandbox="workspace"),), 1.0
    )
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # a PATH without bwrap
    engine = build_engine(settings, AgentCatalog({"fake": fake(tmp_path)}))  # restores s1 at its start
    await engine.start()
    try:
        with pytest.raises(EngineError, match="apt install bubblewrap"):
            await engine.call(verbs.CHECK_NEW_SESSION, verbs.NewSession("fake", folder=str(work)))
        with pytest.raises(EngineError, match="apt install bubblewrap"):
            await engine.call(verbs.NEW_SESSION, verbs.NewSession("fake", folder=str(work), sandbox=ON))
        assert engine.ids() == ["s1"]
        view = engine.view("s1")
        assert view.sandbox == ON and "bubblewrap" in view.reason  # restored sandboxed, and not started
        # named for what is missing — bubblewrap, not the agent — with bubblewrap's fix
        assert view.failure is not None and view.failure.kind is FailureKind.SANDBOX_UNAVAILABLE, view.failure
        assert "apt install bubblewrap" in view.failure.fix and "agent" not in view.reason.split(":")[0]
        with pytest.raises(Exception, match="bubblewrap"):
            await engine.manager.connect("s1")  # a reconnect does not start it either
        await engine.call(verbs.SEND, verbs.Send("s1", "hello"))  # nor a prompt: its row says why
        await until(lambda: engine.view("s1").turns >= 1, 10, "the refused turn")
        row = engine.history("s1")[-1].text
        assert row.startswith("Sandbox cannot start — ") and "Fix: " in row and "install the agent" not in row, row
        assert not (tmp_path / "agent-state").exists() and not bwrapped(work)
        assert not running(FAKE_AGENT, work), "the agent started without its sandbox"
        assert engine.view("s1").sandbox == ON
    finally:
        await engine.close()


def test_the_registry_keeps_the_sandbox_and_never_reads_one_as_none(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    records = (
        SessionRecord("a", "a", "demo", sandbox="workspace"),
        SessionRecord("b", "b", "demo", sandbox="workspace", sandbox_network=("api.example.com:443",)),
        SessionRecord("c", "c", "demo"),
    )
    registry.save(records, 1.0)
    back = {r.id: sandbox_of(r) for r in registry.load().sessions}
    assert back == {"a": ON, "b": Sandbox(SandboxMode.WORKSPACE, ("api.example.com:443",)), "c": NO_SANDBOX}
    strictest = Sandbox(SandboxMode.WORKSPACE, network=())
    for odd in ({"sandbox": 7}, {"sandbox": "jail-v2"}, {"sandbox": ["workspace"]}):
        record = SessionRecord.from_json({"id": "x", "name": "x", "agent": "demo", **odd})
        assert record is not None and sandbox_of(record) == strictest, odd
    record = SessionRecord.from_json(
        {"id": "x", "name": "x", "agent": "demo", "sandbox": "workspace", "sandbox_network": 5}
    )
    assert record is not None and sandbox_of(record) == strictest


async def test_the_acp_client_writes_for_a_sandboxed_agent_only_what_its_sandbox_may(tmp_path: Path) -> None:
    """The client writes files for the agent outside its sandbox: a hook asked for that way
    would run at the user's next commit, so the sandbox's rules hold there too."""
    work = tmp_path / "repo"
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / ".git" / "config").write_text("")
    plan = plan_for(ON, work, fake(tmp_path), settings_of(tmp_path))
    assert plan is not None
    client = AcpClient(work, cast(Any, None), plan.rules)
    await client.write_text_file("s", str(work / "src" / "ok.py"), "ok")
    assert (work / "src" / "ok.py").read_text() == "ok"
    for target in (work / ".git" / "hooks" / "pre-commit", work / ".git" / "config"):
        with pytest.raises(RequestError, match="refused by the sandbox"):
            await client.write_text_file("s", str(target), "#!/bin/sh\ntouch /tmp/pwned\n")
    assert not (work / ".git" / "hooks" / "pre-commit").exists() and (work / ".git" / "config").read_text() == ""


def test_sandbox_on_the_command_line_of_new_run_and_fan_out() -> None:
    from polypilot_tui.cli import build_parser, sandbox_choice

    parser = build_parser()
    for argv in (["new"], ["run", "p"], ["fan-out", "copilot:2", "p"]):
        assert sandbox_choice(parser.parse_args(argv)) is None  # the agent's own
        assert sandbox_choice(parser.parse_args([*argv[:1], "--sandbox", "workspace", *argv[1:]])) == ON
        assert sandbox_choice(parser.parse_args([*argv[:1], "--sandbox", "off", *argv[1:]])) == NO_SANDBOX
        with pytest.raises(SystemExit):
            parser.parse_args([*argv[:1], "--sandbox", "none", *argv[1:]])


def test_a_sandboxed_run_without_bwrap_says_how_to_fix_it_and_starts_nothing(tmp_path: Path) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(
        f'[fake]\nkind = "acp"\ncommand = "{sys.executable}"\nargs = ["{FAKE_AGENT}"]\nsandbox = "workspace"\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env |= {"PATH": str(tmp_path / "bin"), "POLYPILOT_STATE_DIR": str(tmp_path / "state")}
    env["POLYPILOT_AGENTS_FILE"] = str(agents)
    cli = [sys.executable, "-m", "polypilot_tui", "run", "--agent", "fake", "hello"]
    done = subprocess.run(cli, cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "apt install bubblewrap" in done.stderr, done.stderr
    assert "Hello" not in done.stdout and not running(FAKE_AGENT, work)


@needs_bwrap
async def test_polypilot_run_says_a_tool_was_refused_by_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Live, the refused shell's completion reads "[tool failed]" before its row is read; the
    row's line then says what it was, as ``polypilot follow`` does. (A missing file of its own
    folder is a plain failure: the test above.)"""
    from polypilot_tui.commands.run import run_headless

    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("the user's key\n")
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    catalog = AgentCatalog({"fake": fake(tmp_path)})
    assert await run_headless(settings_of(tmp_path), catalog, "fake", f"SHCMD cat {home}/.ssh/id_ed25519") == 0
    printed = capsys.readouterr().out
    assert "[tool failed]\n[tool cat " in printed and "] refused by the sandbox\n" in printed, printed
    assert "the user's key" not in printed


def test_a_run_that_asks_the_sandbox_checks_the_agents_network_rule_before_anything_starts(tmp_path: Path) -> None:
    """``run --sandbox workspace`` keeps the agent's network rule, as the engine does: one that
    cannot be kept is said before the run starts (exit 2), as for the agent's own sandbox."""
    agents = tmp_path / "agents.toml"
    agents.write_text(
        f'[fake]\nkind = "acp"\ncommand = "{sys.executable}"\nargs = ["{FAKE_AGENT}"]\nnetwork = ["nohost"]\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env |= {"POLYPILOT_STATE_DIR": str(tmp_path / "state"), "POLYPILOT_AGENTS_FILE": str(agents)}
    cli = [sys.executable, "-m", "polypilot_tui", "run", "--agent", "fake", "--sandbox", "workspace", "hello"]
    done = subprocess.run(cli, cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "cannot start sandboxed" in done.stderr and "nohost" in done.stderr, done.stderr
    assert not running(FAKE_AGENT, work)


def test_the_sandbox_chosen_for_a_session_is_the_asked_one_else_the_agents() -> None:
    from polypilot_tui.domain.sandbox import chosen

    rule = ("api.example.com:443",)
    assert chosen(None, "off", None) == NO_SANDBOX
    assert chosen(None, "workspace", list(rule)) == Sandbox(SandboxMode.WORKSPACE, rule)
    assert chosen(ON, "off", list(rule)) == Sandbox(SandboxMode.WORKSPACE, rule)  # the rule is kept
    assert chosen(Sandbox(SandboxMode.WORKSPACE, ()), "off", list(rule)) == Sandbox(SandboxMode.WORKSPACE, ())
    assert chosen(NO_SANDBOX, "workspace", list(rule)) == NO_SANDBOX  # off, as asked
