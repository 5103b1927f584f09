"""Issue #22, "No one else in": another local user gets nothing of ours through a folder, a
link or the engine's socket.

Real users (made with useradd, removed after; tests/support/local_users.py) do what an
attacker on the same machine can: make the state folder (or a folder above it, or the config
folder) first, put links in our folder to files of ours, listen on ``engine.sock``, connect to
our engine.
Every entry point must refuse with a message naming the path, what is wrong and the fix;
nothing is followed, truncated, read, sent or served.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.agents.base import tail_lines
from polypilot_tui.agents.stderr_log import AgentStderr
from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.infra.logs import PrivateLogFile
from polypilot_tui.infra.private import NotPrivate
from polypilot_tui.service.peer import REFUSAL_TEXT
from polypilot_tui.service.serve import EngineRefused, bind_socket
from polypilot_tui.storage.history import HistoryDB, WriteResult
from polypilot_tui.storage.lock import StateLock
from polypilot_tui.storage.registry import Registry
from polypilot_tui.storage.saved_rows import SavedRows
from polypilot_tui.storage.spill import Spill, read_spill, write_spill
from polypilot_tui.ui.ui_state import load_ui_state
from tests.reliability.conftest import POLYPILOT, clean_env, polypilot
from tests.support.engine_service import kill_engine_of, running_engine
from tests.support.local_users import LocalUser, local_user, shared_folder
from tests.support.waiting import until_blocking

EXIT_NOT_PRIVATE = 7
ENTRY_POINTS = {
    "dashboard": [],
    "dashboard --in-process": ["--in-process"],
    "serve": ["serve"],
    "send": ["send", "demo", "the secret prompt"],
    "status": ["status"],
}


@pytest.fixture(scope="module")
def other() -> Iterator[LocalUser]:
    with local_user() as user:
        yield user


@pytest.fixture
def shared() -> Iterator[Path]:
    with shared_folder() as folder:
        yield folder


def refused(env: dict[str, str], args: list[str]) -> str:
    """Run a polypilot command that must refuse (exit 7, one clear line); its stderr."""
    done = polypilot(env, *args, timeout=60)
    assert done.returncode == EXIT_NOT_PRIVATE, (args, done.returncode, done.stdout[-500:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr and done.stdout == "", done.stderr
    return done.stderr


# ---- folders ---------------------------------------------------------------------------
def test_a_state_folder_another_user_made_is_refused_by_every_entry_point(
    tmp_path: Path, other: LocalUser, shared: Path
) -> None:
    state = shared / "state"
    victim = tmp_path / "notes.txt"
    victim.write_text("my notes\n")

    def make_it_first() -> None:  # the attack: our engine.err then truncated notes.txt
        os.mkdir(state)
        os.chmod(state, 0o777)
        os.symlink(victim, state / "engine.err")

    other.run(make_it_first)
    env = clean_env(state)
    try:
        for name, args in ENTRY_POINTS.items():
            said = refused(env, args)
            assert str(state) in said and f"belongs to {other.name}" in said, (name, said)
            assert "choose a folder of your own" in said, (name, said)  # and how to fix it
    finally:
        kill_engine_of(state)
    assert victim.read_text() == "my notes\n"
    assert os.listdir(state) == ["engine.err"]  # nothing of ours was made there


def test_a_folder_above_the_state_folder_made_by_another_user_is_refused(
    tmp_path: Path, other: LocalUser, shared: Path
) -> None:
    parent = shared / "polypilot"
    other.run(lambda: os.mkdir(parent, 0o755))  # we (root) could still make our folder inside it
    env = clean_env(parent / "state")
    try:
        for name, args in ENTRY_POINTS.items():
            said = refused(env, args)
            assert f"{parent} (above {parent / 'state'}) belongs to {other.name}" in said, (name, said)
            assert "choose a folder outside it" in said
    finally:
        kill_engine_of(parent / "state")
    assert os.listdir(parent) == []


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_state_folder_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(mode)
    said = refused(clean_env(state), ["status"])
    assert f"{state} can be written by other users (mode {mode:o})" in said
    assert f"chmod 700 {state}" in said
    said = refused(clean_env(state), ["serve"])
    assert f"chmod 700 {state}" in said
    assert stat.S_IMODE(state.stat().st_mode) == mode  # told, not silently changed
    assert os.listdir(state) == []


def test_a_folder_above_that_others_can_write_must_be_sticky(tmp_path: Path, shared: Path) -> None:
    """A writable folder above ours lets anyone rename ours away and put theirs in its place,
    unless it is sticky like /tmp: a private state folder inside a sticky one is fine."""
    open_parent = tmp_path / "open"
    open_parent.mkdir()
    open_parent.chmod(0o777)
    said = refused(clean_env(open_parent / "state"), ["status"])
    assert f"{open_parent} (above {open_parent / 'state'}) can be written by other users and is not sticky" in said

    inside_sticky = shared / "state"
    inside_sticky.mkdir(mode=0o700)
    done = polypilot(clean_env(inside_sticky), "status", "--json", timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_spill_folder_another_user_made_is_refused_and_left_alone(
    tmp_path: Path, other: LocalUser, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What could not be saved at quit falls back to $XDG_RUNTIME_DIR/polypilot-unsaved: never
    into a folder there that another user made first."""
    theirs = shared / "polypilot-unsaved"
    other.run(lambda: (os.mkdir(theirs), os.chmod(theirs, 0o777)))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # the state folder cannot be written: the spill goes to the runtime folder
    spill = Spill(str(blocked / "state"), time.time(), rows=[("s1", 0, ChatItem(ItemKind.USER, "unsaved words", 1.0))])
    with pytest.raises(OSError) as caught:
        write_spill(spill)
    assert f"{theirs} belongs to {other.name}" in str(caught.value)
    assert os.listdir(theirs) == [] and stat.S_IMODE(theirs.stat().st_mode) == 0o777


def test_settings_and_agents_files_another_user_could_write_are_refused(
    tmp_path: Path, other: LocalUser, shared: Path
) -> None:
    """The agents file names the commands polypilot runs, the settings where it keeps things:
    a config folder another user made first is theirs to fill."""
    config = shared / "config"
    agents = 'kind = "acp"\ncommand = "/bin/sh"\nargs = ["-c", "echo theirs"]\n'

    def make_it_first() -> None:
        os.mkdir(config, 0o755)
        (config / "agents.toml").write_text("[theirs]\n" + agents)
        (config / "config.toml").write_text(f'state_dir = "{shared}/their-state"\n')

    other.run(make_it_first)
    env = clean_env(tmp_path / "state", POLYPILOT_CONFIG_DIR=str(config))
    for args in (["agents"], ["status"]):
        done = polypilot(env, *args, timeout=60)
        assert done.returncode == 2 and "theirs" not in done.stdout, (done.stdout, done.stderr)
        # The first of the config folder's files read (.env, then config.toml) names it.
        said = f"{config / '.env'} is not safe: {config} (above {config / '.env'}) belongs to"
        assert f"{said} {other.name}" in done.stderr, done.stderr

    mine = tmp_path / "agents.toml"
    mine.write_text("[mine]\n" + agents)
    mine.chmod(0o666)
    env = clean_env(tmp_path / "state", POLYPILOT_AGENTS_FILE=str(mine))
    done = polypilot(env, "agents", timeout=60)
    assert done.returncode == 2 and f"agents file {mine} can be written by every user" in done.stderr, done.stderr
    mine.chmod(0o664)  # a user-private group (umask 002) is the user: accepted
    done = polypilot(env, "agents", timeout=60)
    assert done.returncode == 0 and "mine" in done.stdout, done.stderr


def in_folder(env: dict[str, str], folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A polypilot command run in ``folder`` (where a user starts it: a checkout, /tmp)."""
    return subprocess.run(
        [*POLYPILOT, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def test_a_dotenv_in_the_working_folder_sets_nothing(tmp_path: Path, other: LocalUser, shared: Path) -> None:
    """The folder polypilot starts in is a repository (content whoever wrote it chose) or a
    shared one like /tmp: a ``.env`` there must not widen the permission policy, name the
    agents that run, or choose where our state goes. Only the config folder's ``.env`` counts."""
    theirs = tmp_path / "their-agents.toml"
    theirs.write_text('[demo]\nkind = "acp"\ncommand = "/bin/sh"\nargs = ["-c", "echo theirs"]\n')
    hostile = (
        "POLYPILOT_PERMISSION_POLICY=allow\n"
        f"POLYPILOT_AGENTS_FILE={theirs}\n"
        f"POLYPILOT_WORKTREES_DIR={tmp_path / 'their-trees'}\n"
        "POLYPILOT_RECORD=false\n"
    )
    cloned = tmp_path / "cloned-repository"
    cloned.mkdir()
    (cloned / ".env").write_text(hostile)  # ours: a clone is written by us
    public = shared / "work"

    def plant() -> None:
        public.mkdir(mode=0o755)
        (public / ".env").write_text(hostile)

    other.run(plant)
    config = tmp_path / "config"
    config.mkdir(mode=0o700)
    env = clean_env(tmp_path / "state", POLYPILOT_CONFIG_DIR=str(config))
    for folder in (cloned, public):
        done = in_folder(env, folder, "config", "--json")
        assert done.returncode == 0, done.stderr
        shown = json.loads(done.stdout)["settings"]
        assert shown["permission_policy"] == {"value": "ask", "from": "default"}, (folder, shown["permission_policy"])
        assert shown["agents_file"]["value"] is None and shown["record"]["value"] is True, folder
        assert shown["worktrees_dir"]["value"] == str(tmp_path / "state" / "worktrees"), folder
        done = in_folder(env, folder, "agents")
        assert done.returncode == 0 and "theirs" not in done.stdout and "built in" in done.stdout, done.stdout

    # The user's own .env, in the config folder, is read (checked like config.toml).
    (config / ".env").write_text("POLYPILOT_DEMO_SPEED=3\n")
    done = in_folder(env, cloned, "config", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["settings"]["demo_speed"] == {"value": 3.0, "from": ".env"}
    assert json.loads(done.stdout)["files"]["dotenv"] == {"path": str(config / ".env"), "in_use": True}
    (config / ".env").chmod(0o666)
    done = in_folder(env, cloned, "config")
    assert done.returncode == 2 and f".env file {config / '.env'} can be written by every user" in done.stderr, (
        done.stderr
    )


# ---- links ---------------------------------------------------------------------------------
VICTIM_TEXT = (
    '{"version": 1, "sessions": [{"id": "stolen", "agent": "demo", "name": "theirs"}], "drafts": {"x": "theirs"}}'
)


@pytest.fixture
def planted(tmp_path: Path, other: LocalUser, shared: Path) -> Callable[[str], tuple[Path, Path]]:
    """Our private state folder, with a link another user put there (while it was open to
    them) at a name of ours, pointing at a file of ours (0644): (state folder, that file)."""
    state = shared / "state"
    state.mkdir(mode=0o700)

    def plant(name: str) -> tuple[Path, Path]:
        victim = tmp_path / f"victim-{name.replace('/', '_')}"
        victim.write_text(VICTIM_TEXT)
        victim.chmod(0o644)
        link = state / name
        link.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        for folder in {state, link.parent}:
            folder.chmod(0o777)
        other.run(lambda: os.symlink(victim, link))
        for folder in {state, link.parent}:
            folder.chmod(0o700)
        assert link.lstat().st_uid == other.uid
        return state, victim

    return plant


def intact(victim: Path) -> None:
    assert victim.read_text() == VICTIM_TEXT
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644


def test_the_engine_never_truncates_a_file_through_a_link_at_engine_err(
    planted: Callable[[str], tuple[Path, Path]],
) -> None:
    state, victim = planted("engine.err")
    try:
        said = refused(clean_env(state), ["engine", "start"])
    finally:
        kill_engine_of(state)
    assert f"{state / 'engine.err'} is a link (to {victim})" in said and "remove the link" in said
    intact(victim)


def _history_write(state: Path) -> Any:
    db = HistoryDB(state / "history.db")
    try:
        result = db.write([("s1", 0, ChatItem(ItemKind.USER, "hello", 1.0))], {}, [])
        return result, db.last_error
    finally:
        db.close()


def _opened(action: Callable[[], Any]) -> Any:
    try:
        return action()
    except NotPrivate as exc:
        return exc


OPENERS: dict[str, tuple[str, Callable[[Path], Any], Callable[[Any], bool]]] = {
    # name of the link: (what opens it, the answer that shows it was refused)
    "history.db": ("history.db", _history_write, lambda r: r[0] is not WriteResult.OK and "is a link" in r[1]),
    "history.db-wal": ("history.db-wal", _history_write, lambda r: r[0] is not WriteResult.OK and "is a link" in r[1]),
    "history.db-shm": ("history.db-shm", _history_write, lambda r: r[0] is not WriteResult.OK and "is a link" in r[1]),
    "sessions.json": ("sessions.json", lambda s: Registry(s).load(repair=False), lambda r: "is a link" in r.problem),
    "ui-state.json": ("ui-state.json", lambda s: load_ui_state(s), lambda r: "is a link" in r[1] and not r[0].drafts),
    "polypilot.lock": (
        "polypilot.lock",
        lambda s: _opened(lambda: StateLock.acquire(s)),
        lambda r: "is a link" in str(r),
    ),
    "a log": (
        "engine.log",
        lambda s: _opened(lambda: PrivateLogFile(s / "engine.log")),
        lambda r: isinstance(r, NotPrivate),
    ),
    "agent-stderr.log": (
        "sessions/s1/agent-stderr.log",
        lambda s: _opened(lambda: AgentStderr(s / "sessions/s1/agent-stderr.log")),
        lambda r: isinstance(r, NotPrivate),
    ),
    "stderr tail": (
        "sessions/s1/agent-stderr.log",
        lambda s: tail_lines(s / "sessions/s1/agent-stderr.log"),
        lambda r: r == (),
    ),
    "spill": (
        "unsaved-x.json",
        lambda s: _opened(lambda: read_spill(s / "unsaved-x.json")),
        lambda r: isinstance(r, NotPrivate),
    ),
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(name, marks=pytest.mark.expect_errors(r"cannot read .*sessions.json: .* is a link"))
        if name == "sessions.json"
        else name
        for name in OPENERS
    ],
)
def test_a_link_another_user_put_in_our_folder_is_never_followed(
    case: str, planted: Callable[[str], tuple[Path, Path]]
) -> None:
    name, opens, was_refused = OPENERS[case]
    state, victim = planted(name)
    if name.startswith("history.db-"):  # the database itself is a real (empty) one of ours
        (state / "history.db").touch(mode=0o600)
    answer = opens(state)
    assert was_refused(answer), answer
    intact(victim)
    assert (state / name).is_symlink()  # left for the user to see, not removed behind their back


def test_saved_rows_are_never_read_through_a_link(planted: Callable[[str], tuple[Path, Path]]) -> None:
    state, victim = planted("history.db")
    victim.unlink()
    other_db = HistoryDB(victim)  # a history of ours elsewhere, which the link would show as this one
    assert other_db.write([("s1", 0, ChatItem(ItemKind.USER, "elsewhere", 1.0))], {}, []) is WriteResult.OK
    other_db.close()
    before = victim.read_bytes()
    saved = SavedRows(state / "history.db")
    try:
        assert saved.extents(["s1"]) is None and "is a link" in saved.last_error
    finally:
        saved.close()
    assert victim.read_bytes() == before


def test_a_replaced_file_replaces_the_link_not_its_target(planted: Callable[[str], tuple[Path, Path]]) -> None:
    state, victim = planted("sessions.json")
    Registry(state).save([], 1.0)
    intact(victim)
    assert not (state / "sessions.json").is_symlink()


# ---- the socket ----------------------------------------------------------------------------
def _listen(path: Path, stop: Path) -> dict[str, Any]:
    """Another user's listener at ``path``: what it was sent, until ``stop`` exists (bounded)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen(8)
    server.settimeout(0.05)
    got, connections = b"", 0
    deadline = time.monotonic() + 120
    while not stop.exists() and time.monotonic() < deadline:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        connections += 1
        conn.settimeout(1.0)
        try:
            while chunk := conn.recv(65536):
                got += chunk
        except TimeoutError:
            pass
        conn.close()
    server.close()
    return {"got": got, "connections": connections}


def test_another_users_listener_at_engine_sock_gets_nothing(tmp_path: Path, other: LocalUser, shared: Path) -> None:
    state = shared / "state"
    state.mkdir(mode=0o700)
    sock, stop = state / "engine.sock", shared / "stop"
    state.chmod(0o777)
    listener = other.start(lambda: _listen(sock, stop))
    until_blocking(lambda: sock.exists() and stat.S_IMODE(sock.lstat().st_mode) == 0o777, 15, "their listener")
    state.chmod(0o700)
    env = clean_env(state)
    try:
        # The socket file is theirs: every entry point refuses it, and serve leaves it alone.
        for name, args in ENTRY_POINTS.items():
            said = refused(env, args)
            assert f"{sock} belongs to {other.name}" in said, (name, said)
        with pytest.raises(EngineRefused, match=f"a socket of {other.name}"):
            bind_socket(sock)
        assert sock.lstat().st_uid == other.uid

        # Made to look like ours (root can chown it): the listener's own user still shows on connect.
        os.chown(sock, os.geteuid(), os.getegid(), follow_symlinks=False)
        said = refused(env, ["send", "demo", "the secret prompt"])
        assert f"{sock} is listened on by a process of another user" in said and other.name in said
        assert "nothing was sent" in said
    finally:
        stop.touch()
        heard = listener.result(30)
        kill_engine_of(state)
    assert heard["got"] == b"", heard
    assert heard["connections"] >= 1  # it was reached, and told nothing


def _connect_and_ask(path: Path) -> bytes:
    """Another user's client: asks our engine to stop; what it answered."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(10)
    client.connect(str(path))
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it may have closed already
        client.sendall(b"POST /v1/engine/stop HTTP/1.1\r\nhost: engine\r\ncontent-length: 2\r\n\r\n{}")
    answer = b""
    try:
        while chunk := client.recv(65536):
            answer += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    client.close()
    return answer


async def test_our_engine_refuses_another_users_connection(other: LocalUser) -> None:
    async with running_engine() as engine:
        engine.state.chmod(0o711)  # reachable to them for the test: the kernel lets them connect
        engine.socket.chmod(0o666)
        answer = other.run(lambda: _connect_and_ask(engine.socket))
        assert answer.startswith(b"HTTP/1.1 403"), answer
        assert REFUSAL_TEXT.encode() in answer
        assert engine.process.poll() is None  # their stop was never read
        info = await engine.info()  # and we are still served
        assert info["pid"] == engine.process.pid
