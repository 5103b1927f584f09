"""Security rules: permissions default to ask and never widen, keys stay out of every file
we write, and state files are private.

- The permission policy defaults to ``ask``, and under ``ask`` nothing answers a permission
  request but the user: not the manager, not the watchdog, not a recovery.
- Recovery reconnects with the configured policy; it never sends an "allow" (PolyPilot's
  blanket auto-approve is exactly what must not come back).
- API keys come from the environment variable a provider names (``api_key_env``); the key
  is never in the config object, in a log record, a recording, ``status --json``, the ACP
  transcript or the registry.
- Everything under the state directory is 0600 (files) / 0700 (folders).
"""

from __future__ import annotations

import asyncio
import logging
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from polypilot_tui.agents import create_backend
from polypilot_tui.agents.acp.process import agent_environment
from polypilot_tui.agents.base import ALLOW_ALWAYS, ALLOW_ONCE, CANCELLED, REJECT_ONCE, AgentBackend, BackendError
from polypilot_tui.commands.status import print_status
from polypilot_tui.config import AgentCatalog, AgentConfig, PermissionPolicy, ProviderConfig, Settings, load_agents
from polypilot_tui.domain.clock import Clock, FakeClock, SystemClock
from polypilot_tui.domain.view import SessionStatus
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import attach_persistence
from polypilot_tui.infra.logs import PrivateLogFile, setup_file_logging
from tests.support.engine import Harness
from tests.support.waiting import advance_until, until

FAKE_ACP_AGENT = Path(__file__).resolve().parents[1] / "support" / "fake_acp_agent.py"
KEY = "sk-test-provider-key-0123456789abcdef"
ALLOWS = {ALLOW_ONCE, ALLOW_ALWAYS, "allow", "always"}


# ---- a spy on every backend a manager makes ---------------------------------------------
class Spy:
    """Wraps each backend; records every permission answer and connect."""

    def __init__(self) -> None:
        self.answers: list[tuple[str, str]] = []
        self.connects = 0
        self.backends: list[Any] = []

    def wrap(self, backend: AgentBackend) -> AgentBackend:
        spy = self

        class Spied:
            kind = backend.kind

            async def connect(self, resume_id: str | None) -> Any:
                spy.connects += 1
                return await backend.connect(resume_id)

            async def answer_permission(self, request_id: str, option_id: str) -> None:
                spy.answers.append((request_id, option_id))
                await backend.answer_permission(request_id, option_id)

            def __getattr__(self, name: str) -> Any:
                return getattr(backend, name)

        self.backends.append(backend)
        return Spied()  # type: ignore[return-value]

    def allows(self) -> list[tuple[str, str]]:
        return [a for a in self.answers if a[1] in ALLOWS]


def spied_manager(settings: Settings, catalog: AgentCatalog, clock: Clock, spy: Spy) -> SessionManager:
    def factory(agent: str, sink: Any, workdir: Path) -> AgentBackend:
        return spy.wrap(create_backend(catalog.get(agent), sink, clock, settings, workdir))

    return SessionManager(settings, catalog, clock, backend_factory=factory)


def demo_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"record": False, **overrides}
    return Settings.read(None, state_dir=tmp_path / "state", **values)


# ---- permissions ------------------------------------------------------------------------
def test_the_permission_policy_defaults_to_ask() -> None:
    assert Settings.read(None).permission_policy is PermissionPolicy.ASK
    assert Settings.read(None).permission_policy is PermissionPolicy.ASK


async def test_under_ask_nothing_but_the_user_answers_a_permission(tmp_path: Path) -> None:
    clock, spy = FakeClock(), Spy()
    manager = spied_manager(demo_settings(tmp_path), load_agents(None), clock, spy)
    sid = await manager.create_session("demo")
    await manager.send(sid, "please write notes")
    await advance_until(clock, lambda: manager.view(sid).pending_permission is not None)
    assert await manager.send(sid, "please delete it too") == "queued"
    await clock.advance(10 * 3600)  # ten hours: no watchdog tier, no cap, nobody answers
    view = manager.view(sid)
    assert view.status is SessionStatus.AWAITING_PERMISSION and spy.answers == []
    request = view.pending_permission
    assert request is not None
    await manager.answer_permission(sid, request.request_id, REJECT_ONCE)  # the user decides
    await advance_until(clock, lambda: manager.view(sid).pending_permission is not None)  # the queued prompt asks again
    await clock.advance(3600)
    assert spy.answers == [(request.request_id, REJECT_ONCE)]
    await manager.stop(sid)  # Stop answers "cancelled", never allow
    assert [a for _, a in spy.answers] == [REJECT_ONCE, CANCELLED]
    await manager.shutdown()


@pytest.mark.parametrize("policy", ["ask", "deny", "allow-in-sandbox"])  # the last: a session not sandboxed
async def test_recovery_never_widens_permissions_on_the_demo_agent(tmp_path: Path, policy: str) -> None:
    clock, spy = FakeClock(), Spy()
    settings = demo_settings(tmp_path, permission_policy=policy)
    manager = spied_manager(settings, load_agents(None), clock, spy)
    sid = await manager.create_session("demo")
    await manager.send(sid, "!permission-loss")  # three denials: reconnect, then resend
    await advance_until(
        clock,
        lambda: (
            manager.session(sid).turn is None
            and not manager.session(sid).recovering
            and len(manager.session(sid).turns) >= 2
        ),
    )
    assert [t.outcome.value for t in manager.session(sid).turns] == ["recovered", "completed"]
    assert spy.connects == 2 and manager.settings.permission_policy == policy
    await manager.send(sid, "please write notes")  # after the recovery: still asked, or still denied
    await clock.advance(60)
    if policy != "deny":
        assert manager.view(sid).status is SessionStatus.AWAITING_PERMISSION
        await manager.stop(sid)
    else:
        await advance_until(clock, lambda: manager.session(sid).turn is None)
        assert "did not write the file" in manager.history(sid)[-1].text
    assert spy.allows() == [] and not any(getattr(b, "_always_allowed", False) for b in spy.backends)
    await manager.shutdown()


async def test_recovery_never_widens_permissions_on_an_acp_agent(tmp_path: Path) -> None:
    spy = Spy()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("readme\n")
    agent = AgentConfig(
        name="fake",
        kind="acp",
        command=sys.executable,
        args=[str(FAKE_ACP_AGENT)],
        cwd=workspace,
        env={"FAKE_ACP_STATE": str(tmp_path / "agent-state")},
    )
    settings = demo_settings(tmp_path, stop_grace_seconds=2.0)
    manager = spied_manager(settings, AgentCatalog({"fake": agent}), SystemClock(), spy)
    try:
        sid = await asyncio.wait_for(manager.create_session("fake"), 30)
        session = manager.session(sid)
        await manager.send(sid, "CHAOS permission-loss")  # 3 of 5 denied: recover (no resend: 2 succeeded)
        await until(lambda: session.turns and session.turn is None and not session.recovering)
        assert [t.outcome.value for t in session.turns] == ["recovered"] and spy.connects == 2
        await manager.send(sid, "TOOL please")  # the recovered agent asks, and nobody answers for it
        await until(lambda: manager.view(sid).pending_permission is not None)
        await asyncio.sleep(1.0)
        assert manager.view(sid).status is SessionStatus.AWAITING_PERMISSION and spy.answers == []
        await manager.stop(sid)
        assert spy.allows() == []
    finally:
        await manager.shutdown()


# ---- keys ---------------------------------------------------------------------------------
def test_a_provider_key_is_read_from_the_variable_it_names_and_never_held_in_config(tmp_path: Path) -> None:
    provider = ProviderConfig(base_url="http://127.0.0.1:9/v1", api_key_env="LLM_ACCESS")
    assert provider.api_key({"LLM_ACCESS": KEY}) == KEY and provider.api_key({}) == ""
    path = tmp_path / "agents.toml"
    path.write_text(
        f'[x]\nkind = "acp"\ncommand = "agent"\n'
        f'provider = {{ base_url = "http://h/v1", api_key_env = "LLM_ACCESS", api_key = "{KEY}" }}\n'
    )
    catalog = load_agents(path)
    # A literal key is refused with a clear reason (that never repeats the key).
    assert "x" not in catalog.agents
    assert any("api_key_env" in p for p in catalog.problems) and KEY not in repr(catalog.problems)
    path.write_text(
        '[x]\nkind = "acp"\ncommand = "agent"\nprovider = { base_url = "http://h/v1", api_key_env = "LLM_ACCESS" }\n'
    )
    config = load_agents(path).get("x")
    assert KEY not in repr(config) and KEY not in msgspec.json.encode(config).decode()
    assert agent_environment(config, {"LLM_ACCESS": KEY, "OTHER": "x"})["LLM_ACCESS"] == KEY  # passed to the agent only


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{r.getMessage()} {r.exc_text or ''} {r.args!r}" for r in caplog.records)


async def test_the_key_never_reaches_a_log_on_an_acp_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, all_logs: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LLM_ACCESS", KEY)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    agent = AgentConfig(
        name="fake",
        kind="acp",
        command=sys.executable,
        args=[str(FAKE_ACP_AGENT)],
        cwd=workspace,
        provider=ProviderConfig(base_url="http://127.0.0.1:9/v1", api_key_env="LLM_ACCESS"),
    )
    assert agent_environment(agent)["LLM_ACCESS"] == KEY  # the agent does get it
    manager = SessionManager(demo_settings(tmp_path), AgentCatalog({"fake": agent}), SystemClock())
    try:
        sid = await asyncio.wait_for(manager.create_session("fake"), 30)
        await manager.send(sid, "hello")
        await until(lambda: manager.session(sid).turns)
        await manager.reconnect(sid)
        assert manager.session(sid).turns[0].outcome.value == "completed"
    finally:
        await manager.shutdown()
    assert all_logs.records and KEY not in _logged(all_logs)


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    """The app's own log file set-up (logging_setup), taken down again after the test."""
    path = setup_file_logging(tmp_path / "logs", "polypilot.log")
    assert path is not None
    yield path
    for handler in list(logging.getLogger().handlers):
        if isinstance(handler, PrivateLogFile):
            logging.getLogger().removeHandler(handler)
            handler.close()


async def test_the_key_never_reaches_the_log_when_a_failing_cli_prints_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log_file: Path
) -> None:
    monkeypatch.setenv("LLM_ACCESS", KEY)
    cli = tmp_path / "copilot"
    cli.write_text('#!/bin/sh\necho "fatal: the provider refused key $LLM_ACCESS" >&2\nexit 1\n')
    cli.chmod(0o755)
    agent = AgentConfig(
        name="c",
        kind="copilot",
        command=str(cli),
        model="gpt-4.1",
        provider=ProviderConfig(base_url="http://127.0.0.1:9/v1", api_key_env="LLM_ACCESS"),
    )
    backend = create_backend(agent, lambda event: None, SystemClock(), demo_settings(tmp_path), tmp_path / "w")
    with pytest.raises(BackendError) as info:
        await asyncio.wait_for(backend.connect(None), 60)
    await backend.close()
    assert KEY in str(info.value.__cause__ or info.value)  # the CLI really printed it: the SDK raised it
    text = log_file.read_text()
    assert "Traceback" in text and "fatal: the provider refused key [redacted]" in text  # logged, redacted
    assert KEY not in text and KEY[:12] not in text
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600


async def test_the_key_never_reaches_logs_recordings_status_or_the_registry(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    all_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The demo agent echoes the prompt, tools print it: the key goes through every path.
    monkeypatch.setenv("MOCK_PROVIDER_KEY", KEY)
    settings = demo_settings(tmp_path, record=True, demo_speed=200)
    manager = SessionManager(settings, load_agents(None), SystemClock())
    persistence = attach_persistence(manager, settings)
    try:
        sid = await manager.create_session("demo")
        await manager.send(sid, f"please look at the project with MOCK_PROVIDER_KEY={KEY} set, then {KEY}")
        await until(lambda: manager.session(sid).turns)
        await manager.send(sid, f"!hang {KEY}")
        await until(lambda: manager.session(sid).turn is not None)
        await manager.stop(sid)
        assert KEY in "".join(i.text for i in manager.history(sid))  # it really went through
        await persistence.flush()
    finally:
        await persistence.close()
        await manager.shutdown()
    assert KEY not in _logged(all_logs)
    recordings = list((Path(settings.state_dir) / "recordings").glob("*.jsonl"))
    assert recordings and all(KEY not in p.read_text() for p in recordings)
    assert "[redacted]" in recordings[0].read_text()
    assert KEY not in (Path(settings.state_dir) / "sessions.json").read_text()
    capsys.readouterr()
    assert print_status(settings, json_mode=True) == 0
    assert KEY not in capsys.readouterr().out


# ---- private files ------------------------------------------------------------------------
async def test_everything_under_the_state_dir_is_private(tmp_path: Path) -> None:
    settings = demo_settings(tmp_path, record=True, demo_speed=200)
    manager = SessionManager(settings, load_agents(None), SystemClock())
    persistence = attach_persistence(manager, settings)
    try:
        sid = await manager.create_session("demo")
        await manager.send(sid, "please look at the project")
        await until(lambda: manager.session(sid).turns)
        await persistence.flush()
    finally:
        await persistence.close()
        await manager.shutdown()
    state = Path(settings.state_dir)
    found = {p.relative_to(state).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in [state, *state.rglob("*")]}
    assert {"sessions.json", "history.db", f"sessions/{sid}/events.jsonl"} <= set(found)
    loose = {name: oct(mode) for name, mode in found.items() if mode != (0o700 if (state / name).is_dir() else 0o600)}
    assert not loose, loose


def test_harness_sessions_start_private_too(make_harness: Callable[..., Harness]) -> None:
    # Engine-only runs (replay, tests) have no store: the session folders are private anyway.
    harness = make_harness()

    async def run() -> Path:
        sid = await harness.new()
        await harness.manager.send(sid, "hello there")
        await harness.until_rest(sid)
        return harness.manager.workdir(sid)

    workdir = asyncio.run(run())
    assert stat.S_IMODE(workdir.stat().st_mode) == 0o700
    assert stat.S_IMODE(workdir.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((workdir / "events.jsonl").stat().st_mode) == 0o600
