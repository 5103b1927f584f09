"""A fleet over real OpenSSH: two sshd on 127.0.0.1 (own ports, homes, keys, state folders),
each "machine" running this checkout's engine, and the local engine, in one FleetEngine.

The sshd servers and their engines are shared by the module's tests (each start costs
seconds); every test ends what it started.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.hosts import INSTALL_COMMAND, UPGRADE_COMMAND, Backoff, HostEntry, HostState, HostView
from polypilot_tui.domain.workspace import Isolation
from polypilot_tui.engine import verbs
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.service.fleet import FleetEngine, HostDown, Member, SshMember
from polypilot_tui.service.ssh import open_tunnel
from tests.support import fake_engine
from tests.support.engine_service import engine_env, kill_engine_of, lock_holder, short_state_dir
from tests.support.sshd import ALIAS, Sshd, missing_tools

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
FAST = Backoff(first=0.2, factor=2.0, cap=1.0)
"""Tries again within a second: the tests bring hosts back and wait for them."""


class Machine:
    """An sshd and the polypilot "installed" behind it (this checkout, a state folder of its own)."""

    def __init__(self, sshd: Sshd) -> None:
        self.sshd = sshd
        self.state = short_state_dir()
        env = {k: v for k, v in engine_env(self.state).items() if k.startswith("POLYPILOT_") and v}
        self.command = shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "polypilot_tui"])

    def entry(self, name: str, command: str | None = None, config: Path | None = None) -> HostEntry:
        options = ("-F", str(config or self.sshd.client_config))
        return HostEntry.checked(name, ALIAS, command or self.command, options)

    def close(self) -> None:
        kill_engine_of(self.state)
        shutil.rmtree(self.state, ignore_errors=True)
        self.sshd.close()


@pytest.fixture(scope="module")
def machines() -> Iterator[tuple[Machine, Machine]]:
    missing = missing_tools()
    if missing:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"{', '.join(missing)} not installed (CI=true: the fleet tests must run)")
        pytest.skip(f"{', '.join(missing)} not installed")
    made: list[Machine] = []
    try:
        for _ in range(2):
            server = Sshd()
            server.start()
            made.append(Machine(server))
        yield made[0], made[1]
    finally:
        for machine in made:
            machine.close()


def member(entry: HostEntry) -> SshMember:
    return SshMember(entry, SystemClock(), connect_timeout=20.0, backoff=FAST, ping_every=0.5, ping_timeout=1.5)


@asynccontextmanager
async def fleet_of(*members: Member) -> AsyncIterator[FleetEngine]:
    state = short_state_dir()
    settings = Settings.read(None, state_dir=state, demo_speed=20)
    local = build_engine(settings, load_agents(None), SystemClock(), persist=False)
    fleet = FleetEngine(local, list(members))
    try:
        yield fleet
    finally:
        await fleet.detach(stop_engine=False)
        shutil.rmtree(state, ignore_errors=True)


async def until(what: str, check: object, timeout: float) -> float:
    """Seconds until ``check()`` held (AssertionError naming ``what`` after ``timeout``)."""
    start = time.monotonic()
    while not check():  # type: ignore[operator]
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what} within {timeout} s")
        await asyncio.sleep(0.02)
    return time.monotonic() - start


def host(fleet: FleetEngine, name: str) -> HostView:
    return next(h for h in fleet.hosts() if h.name == name)


def said(fleet: FleetEngine, sid: str, text: str) -> bool:
    return any(text in row.text.replace("**", "") for row in fleet.history(sid))


async def test_sessions_on_two_hosts_and_here_in_one_fleet_a_killed_host_goes_stale_and_comes_back(
    machines: tuple[Machine, Machine],
) -> None:
    one, two = machines
    async with fleet_of(member(one.entry("one")), member(two.entry("two"))) as fleet:
        await fleet.start()
        # On return the hosts still attach, in the background: start waits for none of them.
        assert [(h.label, h.state) for h in fleet.hosts()] == [
            ("Local", HostState.LIVE),
            ("one", HostState.CONNECTING),
            ("two", HostState.CONNECTING),
        ]
        await until("both hosts live", lambda: all(h.live for h in fleet.hosts()), 45)
        sids = {}
        for name in ("", "one", "two"):
            sids[name] = await fleet.member(name).call(verbs.NEW_SESSION, verbs.NewSession("demo"))
            await fleet.call(verbs.SEND, verbs.Send(sids[name], f"hello {name or 'local'}"))
        assert [fleet.host_of(sids[n]) for n in ("", "one", "two")] == ["", "one", "two"]
        assert [v.id for v in fleet.views()] == [sids[""], sids["one"], sids["two"]]
        for name in ("", "one", "two"):
            await until(f"{name}'s reply", lambda n=name: said(fleet, sids[n], f"You said: hello {n or 'local'}"), 30)

        # Host two's sshd dies mid-stream: marked stale within 5 s, its row stays listed.
        await fleet.call(verbs.SEND, verbs.Send(sids["two"], "a long one " * 40))
        two.sshd.stop()
        await until("two marked stale", lambda: host(fleet, "two").state is HostState.STALE, 5.0)
        assert sids["two"] in fleet.ids()
        assert host(fleet, "two").last_seen is not None and host(fleet, "two").reason
        with pytest.raises(HostDown, match="two is stale"):
            await fleet.call(verbs.SEND, verbs.Send(sids["two"], "nobody there"))
        # The others keep streaming meanwhile.
        await fleet.call(verbs.SEND, verbs.Send(sids["one"], "still here"))
        await until("one's reply while two is down", lambda: said(fleet, sids["one"], "You said: still here"), 30)
        assert host(fleet, "one").live

        # Back: live again, its session and history whole (its engine kept them).
        two.sshd.restart()
        await until("two live again", lambda: host(fleet, "two").live, 30)
        await until("two's rows fetched again", lambda: said(fleet, sids["two"], "You said: hello two"), 30)
        await fleet.call(verbs.SEND, verbs.Send(sids["two"], "back again"))
        await until("two's reply after it came back", lambda: said(fleet, sids["two"], "You said: back again"), 30)


async def test_a_refused_key_a_missing_polypilot_and_another_version_are_named_and_local_works(
    machines: tuple[Machine, Machine], tmp_path: Path
) -> None:
    one, _ = machines
    old = Path(tempfile.mkdtemp(prefix="old", dir=one.sshd.folder))
    script = old / "polypilot"
    script.write_text(
        "#!/bin/sh\n"
        f"FAKE_ENGINE_API=9 exec {shlex.quote(sys.executable)} {shlex.quote(fake_engine.__file__)} start "
        f"{shlex.quote(str(old / 'engine.sock'))} {shlex.quote(str(old / 'engine.pid'))}\n"
    )
    script.chmod(0o755)
    members = [
        member(one.entry("nokey", config=one.sshd.wrong_key_config)),
        member(one.entry("bare", command="polypilot-not-installed-here")),
        member(one.entry("old", command=shlex.quote(str(script)))),
    ]
    try:
        async with fleet_of(*members) as fleet:
            await fleet.start()
            sid = await fleet.call(verbs.NEW_SESSION, verbs.NewSession("demo"))  # Local answers meanwhile
            assert fleet.host_of(sid) == ""

            def failed(name: str) -> bool:
                return host(fleet, name).state in (HostState.UNREACHABLE, HostState.OTHER_VERSION)

            await until("every host failed", lambda: all(failed(n) for n in ("nokey", "bare", "old")), 30)
            assert host(fleet, "nokey").reason.startswith("auth refused: ")
            assert "Permission denied" in host(fleet, "nokey").reason
            assert host(fleet, "bare").state is HostState.UNREACHABLE
            assert f"polypilot is not installed there: `{INSTALL_COMMAND}`" in host(fleet, "bare").reason
            assert host(fleet, "old").state is HostState.OTHER_VERSION
            assert f"API v9, this dashboard v{verbs.API_VERSION}" in host(fleet, "old").reason
            assert UPGRADE_COMMAND in host(fleet, "old").reason
    finally:
        pid = old / "engine.pid"
        if pid.exists():
            os.kill(int(pid.read_text()), signal.SIGKILL)


DASHBOARD = textwrap.dedent(
    """
    import asyncio, sys
    from polypilot_tui.config import Settings, load_agents
    from polypilot_tui.domain.clock import SystemClock
    from polypilot_tui.domain.hosts import HostEntry
    from polypilot_tui.engine.builder import build_engine
    from polypilot_tui.service.fleet import FleetEngine, SshMember

    async def main():
        state, config, command = sys.argv[1:4]
        local = build_engine(Settings.read(None, state_dir=state), load_agents(None), SystemClock(), persist=False)
        entry = HostEntry.checked("one", "testhost", command, ("-F", config))
        fleet = FleetEngine(local, [SshMember(entry, SystemClock())])
        await fleet.start()
        while not fleet.hosts()[1].live:
            await asyncio.sleep(0.05)
        print("live", flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
    """
)


def ssh_processes_with(marker: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if words and words[0].endswith(b"ssh") and marker.encode() in b" ".join(words):
            found.append(int(cmdline.parent.name))
    return found


async def test_a_killed_dashboard_leaves_no_ssh_behind(machines: tuple[Machine, Machine], tmp_path: Path) -> None:
    one, _ = machines
    config = one.sshd.folder / f"config-{os.getpid()}-killed"  # this test's ssh, told apart by its -F
    shutil.copy(one.sshd.client_config, config)
    state = short_state_dir()
    proc = subprocess.Popen(
        [sys.executable, "-c", DASHBOARD, str(state), str(config), one.command],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        assert line.strip() == b"live"
        assert ssh_processes_with(str(config))  # its forward runs
        proc.kill()
        proc.wait(10)
        await until("no ssh left of the killed dashboard", lambda: not ssh_processes_with(str(config)), 5.0)
    finally:
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(state, ignore_errors=True)


async def test_a_silent_connection_master_is_gone_around_and_a_stale_one_removed(
    machines: tuple[Machine, Machine],
) -> None:
    """A master that accepts and never answers used to hang every ssh to its host (agent-deck
    #1421); one that is only slow on a loaded machine still serves the user's other sessions:
    its socket is kept and our ssh goes without it. A socket nobody listens on is removed."""
    one, _ = machines
    control = one.sshd.folder / "cm-hung"
    config = one.sshd.folder / "config-master"
    config.write_text(f"Host {ALIAS}\n    ControlPath {control}\n" + one.sshd.client_config.read_text())
    hung = socket.socket(socket.AF_UNIX)
    hung.bind(str(control))
    hung.listen(8)  # accepts (the kernel's backlog), never greets
    try:
        tunnel = await open_tunnel(ALIAS, remote_command=one.command, ssh_options=["-F", str(config)], timeout=10)
        await tunnel.close()
        assert control.is_socket()  # not ours to remove
    finally:
        hung.close()  # now stale: bound, nobody listening
    tunnel = await open_tunnel(ALIAS, remote_command=one.command, ssh_options=["-F", str(config)], timeout=10)
    await tunnel.close()
    assert not control.exists()


def polypilot(*args: str, config: Path, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**engine_env(state), "POLYPILOT_CONFIG_DIR": str(config)}
    return subprocess.run(
        [sys.executable, "-m", "polypilot_tui", *args], env=env, capture_output=True, text=True, timeout=90
    )


async def test_commands_aim_at_a_host_and_ls_all_hosts_lists_every_one_saying_which_failed(
    machines: tuple[Machine, Machine], tmp_path: Path
) -> None:
    one, _ = machines
    config, state = tmp_path / "config", short_state_dir()
    try:
        from polypilot_tui.service.hosts_file import add_host

        add_host(config / "hosts.json", one.entry("one"))
        add_host(config / "hosts.json", HostEntry.checked("gone", "127.0.0.1:1", one.command))
        made = await asyncio.to_thread(
            polypilot, "new", "--host", "one", "--name", "over there", config=config, state=state
        )
        assert made.returncode == 0, made.stderr
        sid, folder = made.stdout.split("\t")[:2]
        assert folder.strip() == str((one.sshd.folder / "home").resolve())  # that machine's home
        sent = await asyncio.to_thread(
            polypilot, "send", "--host", "one", sid, "hi there", "--wait", config=config, state=state
        )
        assert sent.returncode == 0 and "You said" in sent.stdout, sent.stderr
        listed = await asyncio.to_thread(polypilot, "ls", "--all-hosts", "--json", config=config, state=state)
        assert listed.returncode == 1  # "gone" did not answer
        assert listed.stderr.startswith("polypilot: gone: cannot reach") and "polypilot: one" not in listed.stderr
        rows = json.loads(listed.stdout)
        assert {"host": "one", "id": sid, "name": "over there"}.items() <= next(
            r for r in rows if r["id"] == sid
        ).items()
    finally:
        kill_engine_of(state)
        shutil.rmtree(state, ignore_errors=True)


async def test_a_host_whose_engine_hangs_is_marked_stale_within_5_s_and_live_when_it_answers(
    machines: tuple[Machine, Machine],
) -> None:
    """No byte lost, none coming: only asking tells a hung engine (or a link gone silent) apart."""
    one, _ = machines
    entry = one.entry("one")
    async with fleet_of(member(entry)) as fleet:
        await fleet.start()
        await until("one live", lambda: host(fleet, "one").live, 45)
        holder = lock_holder(one.state)
        assert holder is not None and holder.pid
        os.kill(holder.pid, signal.SIGSTOP)
        try:
            marked = await until("one marked stale", lambda: host(fleet, "one").state is HostState.STALE, 5.0)
            assert marked < 5.0 and "no answer within" in host(fleet, "one").reason
        finally:
            os.kill(holder.pid, signal.SIGCONT)
        await until("one live again", lambda: host(fleet, "one").live, 45)


async def test_a_worktree_session_on_a_host_is_made_diffed_and_committed_there_through_the_fleet(
    machines: tuple[Machine, Machine],
) -> None:
    one, _ = machines
    repo = one.sshd.folder / "home" / "wt-repo"  # in that machine's home
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["config", "user.name", "On One"], ["config", "user.email", "o@e"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, timeout=30)
    (repo / "README").write_text("hi\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, timeout=30)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "init"], check=True, timeout=30)
    async with fleet_of(member(one.entry("one"))) as fleet:
        await fleet.start()
        await until("one live", lambda: host(fleet, "one").live, 45)
        new = verbs.NewSession("demo", folder="~/wt-repo", isolation=Isolation.WORKTREE)
        sid = await fleet.member("one").call(verbs.NEW_SESSION, new)
        await until("its view", lambda: sid in fleet.ids(), 10)
        worktree = Path(fleet.view(sid).cwd)
        assert fleet.host_of(sid) == "one" and worktree != repo and (worktree / "README").exists()
        (worktree / "README").write_text("hi\nfrom one\n")  # as its agent would
        # Asked through the fleet (Local does not know the session): it goes to one's engine.
        page = await fleet.call(verbs.DIFF, verbs.DiffRange(sid))
        assert "+from one" in page.text
        await fleet.call(verbs.COMMIT, verbs.Commit(sid, "From one"))

        def subjects(where: Path, *rev: str) -> list[str]:
            done = subprocess.run(
                ["git", "-C", str(where), "log", "--format=%s", *rev], capture_output=True, text=True, timeout=30
            )
            return done.stdout.split()

        assert subjects(worktree) == ["From", "one", "init"]  # committed on its branch, there
        assert subjects(repo, "main") == ["init"]  # its base untouched
