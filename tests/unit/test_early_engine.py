"""A plain ``polypilot``'s early engine (service/spawn.py, from entry.py): started from the raw
settings before their models are imported, taken by the dashboard only for exactly the state folder
and agents file its validated settings name, stopped otherwise — real processes, real files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polypilot_tui.config import Settings
from polypilot_tui.service.spawn import EarlyEngine, raw_engine_home, start_engine_early
from tests.support.engine_service import engine_env
from tests.support.processes import alive
from tests.support.waiting import until_blocking

PROBE = """
import sys
from polypilot_tui.service import spawn

real_spawn, real_claim = spawn.spawn_engine, spawn.EarlyEngine.claim

def spawning(home):
    process = real_spawn(home)
    models = "polypilot_tui.config" in sys.modules
    print("spawned", process.pid if process else None, models, "textual" in sys.modules, flush=True)
    if models:
        raise SystemExit(0)  # the dashboard's own spawn, not an early one: its UI would start next
    return process

def claiming(self, settings):
    got = real_claim(self, settings)
    print("claimed", got.pid if got else None, flush=True)
    raise SystemExit(0)  # the dashboard would start here, on the engine it was given

spawn.spawn_engine = spawning
spawn.EarlyEngine.claim = claiming
sys.argv = ["polypilot"]
from polypilot_tui.entry import main
sys.exit(main())
"""


def made(state: Path) -> Path:
    """A state folder as a returning user has it (a first start spawns nothing early)."""
    state.mkdir(mode=0o700)
    return state


def probe(tmp_path: Path, extra: dict[str, str] | None = None, made_state: bool = True) -> tuple[int, list[list[str]]]:
    """A plain ``polypilot`` in ``tmp_path``'s state and config folders (the state folder made
    first unless ``made_state`` is false); its exit code and what it printed."""
    state = made(tmp_path / "state") if made_state else tmp_path / "state"
    env = engine_env(state, {"POLYPILOT_CONFIG_DIR": str(tmp_path / "config"), **(extra or {})})
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    return done.returncode, [line.split() for line in done.stdout.splitlines()]


@contextmanager
def stopped_after(pids: list[int]) -> Iterator[None]:
    """Whatever engine a test started is ended when it is over."""
    try:
        yield
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_plain_start_spawns_its_engine_before_the_models_and_the_dashboard_takes_it(tmp_path: Path) -> None:
    code, said = probe(tmp_path)
    spawned = [line for line in said if line[0] == "spawned"]
    pids = [int(line[1]) for line in spawned if line[1] != "None"]
    with stopped_after(pids):
        assert code == 0, said
        # Spawned once, before the settings' models and the UI were imported; the same process taken.
        assert spawned == [["spawned", str(pids[0]), "False", "False"]], said
        assert ["claimed", str(pids[0])] in said
        assert alive(pids[0])  # taken: it outlives the command, as a dashboard's engine does


def test_a_start_refused_after_its_engine_was_spawned_stops_that_engine(tmp_path: Path) -> None:
    """A setting the models refuse (the raw reading does not check it): the command ends with
    its usage error, and the engine it started early is stopped and reaped, never claimed."""
    code, said = probe(tmp_path, {"POLYPILOT_HEARTBEAT_SECONDS": "0"})
    pids = [int(line[1]) for line in said if line[0] == "spawned" and line[1] != "None"]
    with stopped_after(pids):
        assert code != 0 and len(pids) == 1 and not any(line[0] == "claimed" for line in said), said
        assert not alive(pids[0])


def test_a_first_start_spawns_nothing_before_its_settings_are_validated(tmp_path: Path) -> None:
    """No state folder yet: none is made before the settings are validated (a refused first
    start leaves nothing behind); the dashboard's own spawn starts the engine."""
    code, said = probe(tmp_path, made_state=False)
    pids = [int(line[1]) for line in said if line[0] == "spawned" and line[1] != "None"]
    with stopped_after(pids):
        assert code == 0 and len(pids) == 1, said
        assert said == [["spawned", str(pids[0]), "True", "False"]], said  # by the dashboard, once validated
    refused = engine_env(tmp_path / "fresh", {"POLYPILOT_CONFIG_DIR": str(tmp_path / "config")})
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=refused | {"POLYPILOT_HEARTBEAT_SECONDS": "0"},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode != 0 and not (tmp_path / "fresh").exists()


def test_an_engine_running_already_is_not_started_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in engine_env(made(tmp_path / "state"), {"POLYPILOT_CONFIG_DIR": str(tmp_path / "config")}).items():
        monkeypatch.setenv(name, value)
    first = start_engine_early()
    assert first is not None and first.process is not None
    try:
        socket = tmp_path / "state" / "engine.sock"
        until_blocking(lambda: socket.exists() and start_engine_early() is None, 30.0, "the engine listens")
    finally:
        first.discard()
    assert first.process.returncode is not None  # never claimed: stopped


def test_a_claim_for_another_folder_stops_the_early_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in engine_env(made(tmp_path / "a"), {"POLYPILOT_CONFIG_DIR": str(tmp_path / "config")}).items():
        monkeypatch.setenv(name, value)
    early = start_engine_early()
    assert early is not None and early.process is not None and early.state_dir == tmp_path / "a"
    elsewhere = Settings.read(None, state_dir=tmp_path / "b")
    assert early.claim(elsewhere) is None
    assert early.process.returncode is not None  # stopped and reaped
    same = EarlyEngine(tmp_path / "a", None)
    same.process = early.process
    assert same.claim(Settings.read(None, state_dir=tmp_path / "a")) is early.process


PATHS = st.sampled_from(["", "~/pp-state", "rel/state", "/tmp/pp state", "~", ".", "a\\b", "~user/x"])


@settings(max_examples=150, deadline=None)
@given(
    env_state=st.none() | PATHS,
    env_agents=st.none() | PATHS,
    file_state=st.none() | PATHS | st.integers(0, 3),
    file_agents=st.none() | PATHS,
)
def test_the_raw_reading_names_the_folder_and_file_the_validated_settings_do(
    tmp_path_factory: pytest.TempPathFactory,
    env_state: str | None,
    env_agents: str | None,
    file_state: str | int | None,
    file_agents: str | None,
) -> None:
    """Whatever the environment and config.toml say of the state folder and agents file: when the
    raw reading names an engine, the validated settings name the same one."""
    config = tmp_path_factory.mktemp("config")
    lines = [
        f"{key} = {value!r}" if isinstance(value, int) else f'{key} = "{value}"'
        for key, value in (("state_dir", file_state), ("agents_file", file_agents))
        if value is not None
    ]
    (config / "config.toml").write_text("\n".join(lines).replace("\\", "\\\\") + "\n")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    environ["POLYPILOT_CONFIG_DIR"] = str(config)
    for name, value in (("POLYPILOT_STATE_DIR", env_state), ("POLYPILOT_AGENTS_FILE", env_agents)):
        if value is not None:
            environ[name] = value
    with mock.patch.dict(os.environ, environ, clear=True):
        try:
            raw = raw_engine_home()
        except Exception:  # noqa: BLE001 - the early start takes any error for "uncertain"
            raw = None
        try:
            validated = Settings.read()
        except Exception:  # noqa: BLE001 - refused: the early engine is stopped (the test above)
            return
    if raw is not None:
        assert raw == (validated.state_dir, validated.agents_file)


SIGNALLED = """
import os, signal, sys
from polypilot_tui.service import spawn

real_spawn, real_claim = spawn.spawn_engine, spawn.EarlyEngine.claim
WHEN, SIGNAL = sys.argv[1], getattr(signal, sys.argv[2])

def spawning(home):
    process = real_spawn(home)
    print("spawned", process.pid if process else None, flush=True)
    if WHEN == "spawn":  # between the spawn and its handing back to entry.py
        os.kill(os.getpid(), SIGNAL)
    return process

def claiming(self, settings):
    print("claiming", flush=True)
    sys.stdin.readline()  # the test signals here, before the dashboard takes the engine
    got = real_claim(self, settings)
    print("claimed", got.pid if got else None, flush=True)
    raise SystemExit(0)

spawn.spawn_engine = spawning
spawn.EarlyEngine.claim = claiming
sys.argv = ["polypilot"]
from polypilot_tui.entry import main
sys.exit(main())
"""


@pytest.mark.parametrize(
    ("when", "name", "ignored"),
    [("claim", "SIGTERM", False), ("claim", "SIGHUP", False), ("spawn", "SIGTERM", False), ("claim", "SIGHUP", True)],
)
def test_a_start_ended_by_a_signal_before_the_claim_stops_its_engine(
    tmp_path: Path, when: str, name: str, ignored: bool
) -> None:
    """SIGTERM or SIGHUP (the terminal closed) before the dashboard took its early engine ended
    the process past entry.py's ``finally``: the engine went on, unowned. Now the command ends
    with 128 + the signal and the engine is stopped; an ignored SIGHUP (nohup) stays ignored."""
    signo = getattr(signal, name)
    env = engine_env(made(tmp_path / "state"), {"POLYPILOT_CONFIG_DIR": str(tmp_path / "config")})

    def disposed() -> None:  # as nohup starts it, or as a terminal does (whatever ran this test)
        signal.signal(signo, signal.SIG_IGN if ignored else signal.SIG_DFL)

    started = subprocess.Popen(
        [sys.executable, "-c", SIGNALLED, when, name],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=disposed,
    )
    assert started.stdin is not None and started.stdout is not None
    spawned = started.stdout.readline().split()
    pids = [int(spawned[1])] if spawned[:1] == ["spawned"] and spawned[1] != "None" else []
    with stopped_after(pids):
        assert len(pids) == 1, spawned
        if when == "claim":
            assert started.stdout.readline().split() == ["claiming"]
            started.send_signal(signo)
            started.stdin.write("\n")
            started.stdin.flush()
        said, _ = started.communicate(timeout=30)
        if ignored:
            assert started.returncode == 0 and f"claimed {pids[0]}" in said
            assert alive(pids[0])
        else:
            assert started.returncode == 128 + signo, said
            assert not alive(pids[0])  # stopped and reaped by the command, never left running


def test_an_engine_that_ends_is_reaped_at_once_and_its_end_seen(tmp_path: Path) -> None:
    """A dashboard's engine that crashes (here: SIGKILLed) leaves no zombie behind while the
    dashboard lives on to start another; its process handle says it ended."""
    from types import SimpleNamespace

    from polypilot_tui.service.spawn import spawn_engine

    process = spawn_engine(SimpleNamespace(state_dir=tmp_path / "state", agents_file=None))
    assert process is not None
    try:
        process.send_signal(signal.SIGKILL)
        until_blocking(lambda: not Path(f"/proc/{process.pid}").exists(), 10, "the killed engine to be reaped")
        assert process.poll() == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
