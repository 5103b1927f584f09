"""Attacks on the bubblewrap sandbox (agents/sandbox.py), as a malicious repository or a
prompt-injected agent would try them: each case names the class it stands for, and is run
against the real argv the launcher builds (real files, real git, real bwrap)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
from acp import RequestError

from polypilot_tui.agents.acp.client import AcpClient
from polypilot_tui.agents.catalog import builtin_tables
from polypilot_tui.agents.sandbox import SandboxUnavailable, launch_argv, plan_for, sandbox_problem
from polypilot_tui.config import AgentConfig, Settings, checked
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode
from polypilot_tui.domain.sandbox_policy import reason_to_ask
from polypilot_tui.infra.beneath import LinkOnTheWay, open_beneath
from tests.support.git_repo import GitRepo

ON = Sandbox(SandboxMode.WORKSPACE)
bwrap_works = pytest.mark.skipif(sandbox_problem(ON) is not None, reason=f"no sandbox here: {sandbox_problem(ON)}")
AGENT = AgentConfig(name="a", kind="acp", sandbox_writable=["${COPILOT_HOME:-~/.copilot}"])


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    (tmp_path / "state").mkdir()
    return Settings.read(None, state_dir=tmp_path / "state")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    return {**os.environ, "HOME": str(tmp_path / "home"), "XDG_RUNTIME_DIR": str(tmp_path / "no-runtime")}


def _victim(tmp_path: Path, name: str) -> Path:
    """A folder of the user's outside the repository (stands for ~/.config, ~/.local/bin…)."""
    victim = tmp_path / "victims" / name
    victim.mkdir(parents=True)
    return victim


def _linked_git(tmp_path: Path, victim: Path) -> Path:
    repo = tmp_path / "linked"
    repo.mkdir()
    (repo / ".git").symlink_to(victim)
    return repo


def _gitdir_file(tmp_path: Path, victim: Path) -> Path:
    repo = tmp_path / "gitdir-file"
    repo.mkdir()
    (repo / ".git").write_text(f"gitdir: {victim}\n")
    return repo


def _commondir_out(tmp_path: Path, victim: Path) -> Path:
    repo = GitRepo(tmp_path / "commondir-out")
    repo.commit()
    (repo.root / ".git" / "commondir").write_text(os.path.relpath(victim, repo.root / ".git") + "\n")
    return repo.root


def _fake_worktree_of_another_repo(tmp_path: Path, victim: Path) -> Path:
    """A ``.git`` file naming a worktree-shaped folder in the repository whose ``commondir``
    is another repository of the user's, its ``gitdir`` pointing back as git's would."""
    other = GitRepo(victim / "other")
    other.commit()
    repo = tmp_path / "fake-worktree"
    own = repo / "meta" / "w"
    own.mkdir(parents=True)
    (repo / ".git").write_text(f"gitdir: {own}\n")
    (own / "commondir").write_text(f"{other.root / '.git'}\n")
    (own / "gitdir").write_text(f"{repo / '.git'}\n")
    (own / "HEAD").write_text("ref: refs/heads/x\n")
    return repo


@pytest.mark.parametrize(
    "make",
    [_linked_git, _gitdir_file, _commondir_out, _fake_worktree_of_another_repo],
    ids=["dot-git-a-link", "gitdir-file-names-a-folder", "commondir-names-a-folder", "fake-worktree-of-another-repo"],
)
def test_a_repository_whose_git_pointers_name_a_folder_of_the_user_gets_no_sandbox(
    tmp_path: Path, settings: Settings, env: dict[str, str], make: object
) -> None:
    """A malicious repository's ``.git`` (a link, a ``gitdir:`` file, a ``commondir``) names a
    folder of the user's: the launcher made it writable as the repository's git folder."""
    victim = _victim(tmp_path, "config")
    folder = make(tmp_path, victim)  # type: ignore[operator]
    plan = plan_for(ON, folder, AGENT, settings, env)
    assert plan is not None
    assert not plan.rules.may_write(str(victim / "autostart" / "evil.desktop")), plan.rules.writable
    if sandbox_problem(ON, env) is None:
        with pytest.raises(SandboxUnavailable, match="not start in a checkout"):
            launch_argv(plan, ["true"], folder, env)


@bwrap_works
def test_a_worktree_head_rewritten_by_an_earlier_run_makes_no_folder_outside_writable(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """A sandboxed agent may write its worktree's git folder (HEAD among it): a ``ref:`` with
    ``..`` written there would name the ref folder made writable at the session's next start.
    A ``core.hooksPath`` outside the checkout is not made either."""
    repo = GitRepo(tmp_path / "repo")
    repo.commit()
    tree = tmp_path / "tree"
    repo.git("worktree", "add", "-q", "-b", "polypilot/w1", str(tree))
    victim = _victim(tmp_path, "bin")
    own = repo.root / ".git" / "worktrees" / "tree"
    (own / "HEAD").write_text("ref: refs/heads/" + os.path.relpath(victim / "x", repo.root / ".git" / "refs" / "heads"))
    outside_hooks = tmp_path / "outside-hooks"
    repo.git("config", "core.hooksPath", str(outside_hooks))
    plan = plan_for(ON, tree, AGENT, settings, env)
    assert plan is not None
    argv = launch_argv(plan, ["sh", "-c", f"echo x > {victim}/planted; echo x > {victim}/../planted"], tree, env)
    subprocess.run(argv, env=env, cwd=tree, capture_output=True, timeout=30, check=False)
    assert list(victim.iterdir()) == [] and not (victim.parent / "planted").exists()
    assert not outside_hooks.exists()


SWAPPER = """
import ctypes, os, sys
folder, outside = sys.argv[1], sys.argv[2]
link = folder + ".link"
os.symlink(outside, link)
exchange = ctypes.CDLL(None, use_errno=True).renameat2  # RENAME_EXCHANGE: one atomic swap
print("ready", flush=True)
while True:
    exchange(-100, folder.encode(), -100, link.encode(), 2)
"""
"""A sandboxed agent's loop, a process of its own: ``folder`` is now a folder, now a link
(swapped atomically, as fast as it can)."""


async def test_the_acp_client_never_writes_through_a_link_swapped_in_after_its_check(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """fs/write_text_file is done by the engine, outside the sandbox: the agent swaps a folder
    of the path for a link to a folder of the user's between the check and the write."""
    work, outside = tmp_path / "work", _victim(tmp_path, "autostart")
    (work / "dir").mkdir(parents=True)
    plan = plan_for(ON, work, AGENT, settings, env)
    assert plan is not None
    client = AcpClient(work, cast(Any, None), plan.rules)
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(work / "dir"), str(outside)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 0.5  # before the fix the race was won at once (5 runs in 5)
        while time.monotonic() < deadline:
            with contextlib.suppress(RequestError, OSError):
                await client.write_text_file("s", str(work / "dir" / "evil.desktop"), "[Desktop Entry]\n")
            if list(outside.iterdir()):
                break
    finally:
        swapper.kill()
        swapper.wait(5)
    assert list(outside.iterdir()) == []


async def test_the_acp_client_reads_nothing_the_sandbox_hides_nor_a_fifo_or_link(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """A session working in ``~/.config`` (dotfiles) has ``~/.config/gh`` hidden by its
    sandbox: fs/read_text_file, done by the engine, must not read it either. A FIFO the agent
    made would hold the engine's thread for good; a link out is refused."""
    config = Path(env["HOME"]) / ".config"
    (config / "gh").mkdir(parents=True)
    (config / "gh" / "hosts.yml").write_text("oauth_token: gho_secret\n")
    (config / "app.toml").write_text("ok\n")
    plan = plan_for(ON, config, AGENT, settings, env)
    assert plan is not None
    client = AcpClient(config, cast(Any, None), plan.rules)
    assert (await client.read_text_file("s", str(config / "app.toml"))).content == "ok\n"
    with pytest.raises(RequestError, match="hidden"):
        await client.read_text_file("s", str(config / "gh" / "hosts.yml"))
    os.mkfifo(config / "pipe")
    try:
        with pytest.raises(RequestError, match="not a regular file"):
            await asyncio.wait_for(client.read_text_file("s", str(config / "pipe")), 5)
    finally:  # before the fix the thread waits for a writer: give it one
        with contextlib.suppress(OSError):
            os.close(os.open(config / "pipe", os.O_WRONLY | os.O_NONBLOCK))


def test_open_beneath_refuses_a_link_on_the_way_or_at_the_end(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", _victim(tmp_path, "home")
    root.mkdir()
    (root / "dir").symlink_to(outside)
    (root / "file").symlink_to(outside / "bashrc")
    for target in (root / "dir" / "x", root / "file"):
        with pytest.raises(LinkOnTheWay):
            open_beneath(root, target, os.O_WRONLY | os.O_CREAT, make_folders=True)
    os.close(open_beneath(root, root / "new" / "x", os.O_WRONLY | os.O_CREAT, make_folders=True))
    assert (root / "new" / "x").is_file() and list(outside.iterdir()) == []


MISREAD = {
    "cd; touch .copilot/home": ("bash", "home"),
    "cd\ntouch .copilot/newline": ("bash", "newline"),
    "cd .?/home/.copilot && touch glob": ("sh", "glob"),  # bash 5.2 skips .. in globs; sh does not
    "touch {.,.}./home/.copilot/braces": ("bash", "braces"),
    "cd -P && touch .copilot/option": ("bash", "option"),
    "builtin cd; touch .copilot/builtin": ("bash", "builtin"),
    "echo .copilot/xargs | (cd; xargs touch)": ("bash", "xargs"),
}
"""Commands ``allow-in-sandbox`` read as inside the workspace that act outside it: in a
folder the sandbox lets the agent write (its own state folder), so only the policy guards."""


@bwrap_works
def test_commands_the_policy_misread_as_inside_are_asked_and_do_act_outside(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for command in [
        *MISREAD,
        "pushd; rm x",
        "popd; rm x",
        "cd -; rm x",
        "chmod -R 777 .*",
        "rm -rf .[.]/work",
        "python3 - <<EOF\nopen('/home/u/.copilot/x','w')\nEOF",
        "xargs -a list rm",
        "time cd; rm x",
    ]:
        data = {"kind": "execute", "rawInput": {"command": command}}
        assert reason_to_ask(data, str(work), ON), command
    for command in ("cd src && rm x", "ls *.py .github/*.yml", "git status\ngit diff", "rm -rf ./.[!.]*"):
        assert reason_to_ask({"kind": "execute", "rawInput": {"command": command}}, str(work), ON) == "", command
    script = "\n".join(f"(cd {work} && {shell} -c {shlex.quote(command)})" for command, (shell, _) in MISREAD.items())
    argv = launch_argv(plan_for(ON, work, AGENT, settings, env), ["sh", "-c", script], work, env)
    subprocess.run(argv, env=env, cwd=work, capture_output=True, timeout=30, check=False)
    assert sorted(p.name for p in (Path(env["HOME"]) / ".copilot").iterdir()) == sorted(
        name for _, name in MISREAD.values()
    )


@bwrap_works
def test_copilot_in_its_sandbox_cannot_plant_the_cli_its_next_run_outside_would_load(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """Copilot's state folders are shared with its runs outside any sandbox, and the CLI runs
    the newest ``pkg/<version>/app.js`` it finds in them (its auto-update): one written there
    by a sandboxed Copilot would run outside the sandbox at the next start."""
    copilot = checked(AgentConfig, {"name": "copilot", **builtin_tables()["copilot"]})
    env = {k: v for k, v in env.items() if k not in ("COPILOT_HOME", "XDG_CACHE_HOME")}
    work, home = tmp_path / "work", Path(env["HOME"])
    work.mkdir()
    planted = [home / ".copilot" / "pkg" / "99.0.0", home / ".cache" / "copilot" / "pkg" / "99.0.0"]
    script = "; ".join(f"mkdir -p {p} && echo 'evil()' > {p}/app.js" for p in planted)
    script += f"; mkdir -p {home}/.copilot/session-state && echo ok > {home}/.copilot/session-state/s"
    argv = launch_argv(plan_for(ON, work, copilot, settings, env), ["sh", "-c", script], work, env)
    subprocess.run(argv, env=env, cwd=work, capture_output=True, timeout=30, check=False)
    assert (home / ".copilot" / "session-state" / "s").read_text() == "ok\n"  # its own state: writable
    assert [p for p in planted if p.exists()] == []


@bwrap_works
def test_no_agent_can_plant_a_package_the_users_next_npx_runs(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """``npx foo`` runs ``~/.npm/_npx/<hash>/node_modules/foo`` again without a check: one
    written by a sandboxed agent would run outside the sandbox. Each agent's sandbox has npm's
    cache in its private /tmp, and ``~/.npm`` read-only."""
    work, npx = tmp_path / "work", Path(env["HOME"]) / ".npm" / "_npx"
    work.mkdir()
    npx.mkdir(parents=True)
    script = (
        f"mkdir -p {npx}/abc/node_modules && echo 'evil()' > {npx}/abc/node_modules/x.js; echo cache=$npm_config_cache"
    )
    for name, table in builtin_tables().items():
        agent = checked(AgentConfig, {"name": name, **table})
        argv = launch_argv(plan_for(ON, work, agent, settings, env), ["sh", "-c", script], work, env)
        done = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=30, check=False)
        assert list(npx.iterdir()) == [], name
        assert done.stdout.strip().endswith("cache=/tmp/npm-cache"), (name, done.stdout, done.stderr)


@bwrap_works
def test_a_sandboxed_copilot_cli_gets_no_more_of_the_environment_than_an_acp_agent(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """The Copilot CLI got the engine's whole environment but a few tokens: cloud keys, the
    ssh agent's and the D-Bus session's addresses were the sandboxed agent's to use."""
    from polypilot_tui.agents.copilot.cli_spec import cli_environment, spec_of

    cli = tmp_path / "copilot"
    cli.write_text("#!/bin/sh\nenv\n")
    cli.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    copilot = checked(AgentConfig, {"name": "copilot", **builtin_tables()["copilot"]})
    secrets = {
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1",
        "DBUS_SESSION_BUS_ADDRESS": "unix:abstract=/tmp/dbus-x",
        "DATABASE_URL": "postgres://u:pw@db/x",
    }
    outer = {**env, **secrets, "GH_TOKEN": "gho_signin", "COPILOT_MODEL": "m"}
    cli_env, _ = cli_environment(copilot, outer)
    spec = spec_of(copilot, str(cli), cli_env, logged_in=True, sandbox=plan_for(ON, work, copilot, settings, outer))
    done = subprocess.run(spec.argv, env=dict(spec.env), capture_output=True, text=True, timeout=30, check=False)
    seen = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert seen.get("GH_TOKEN") == "gho_signin" and seen.get("COPILOT_MODEL") == "m", done.stderr
    assert seen.get("HOME") == env["HOME"] and "PATH" in seen
    assert [name for name in secrets if name in seen or name in dict(spec.env)] == []


@bwrap_works
def test_other_agents_sign_ins_and_the_x_cookie_are_hidden_an_agents_own_is_not(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """With the network shared the X server's abstract socket is reachable: its cookie would
    let a sandboxed agent type into the user's terminal. Another agent's sign-in is a key to
    the user's account; the agent's own (in its state folder) is how it works."""
    home, work = Path(env["HOME"]), tmp_path / "work"
    work.mkdir()
    files = {
        home / ".Xauthority": "cookie",
        home / ".codex" / "auth.json": "codex-key",
        home / ".claude" / ".credentials.json": "claude-key",
        home / ".python_history": "secret typed",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    tables = builtin_tables()
    script = "cat " + " ".join(str(p) for p in files) + " 2>/dev/null"
    for name, own in (("opencode", ""), ("codex", "codex-key")):
        agent = checked(AgentConfig, {"name": name, **tables[name]})
        argv = launch_argv(plan_for(ON, work, agent, settings, env), ["sh", "-c", script], work, env)
        done = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=30, check=False)
        assert done.stdout == own, (name, done.stdout, done.stderr)
    (home / ".codex" / "auth.json").unlink()  # not signed in yet: its sandbox starts all the same
    codex = checked(AgentConfig, {"name": "codex", **tables["codex"]})
    launch_argv(plan_for(ON, work, codex, settings, env), ["true"], work, env)


@bwrap_works
def test_the_private_tmp_and_shm_are_bounded_where_bwrap_can(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """/tmp and /dev/shm live in memory: unbounded, one sandbox may take half of it each."""
    help_text = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10, check=False).stdout
    if "--size" not in help_text:
        pytest.skip("this bubblewrap cannot bound a tmpfs (older than 0.8): documented")
    work = tmp_path / "work"
    work.mkdir()
    argv = launch_argv(plan_for(ON, work, AGENT, settings, env), ["df", "-B1", "/tmp", "/dev/shm"], work, env)
    done = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=30, check=False)
    sizes = [int(line.split()[1]) for line in done.stdout.splitlines()[1:]]
    assert sizes == [2 * 1024**3] * 2, (done.stdout, done.stderr)  # agents/sandbox.py's TMP_SIZE


KEYRING = """
import ctypes, json, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
keyctl = {"x86_64": 250, "aarch64": 219}[__import__("os").uname().machine]
libc.syscall(keyctl, 1, None)  # a session keyring of this process's own: the machine's is not touched
add_key = {"x86_64": 248, "aarch64": 217}[__import__("os").uname().machine]
assert libc.syscall(add_key, b"user", b"polypilot-test", b"kerberos-ticket", 15, -3) > 0
subprocess.run(json.loads(sys.argv[1]), timeout=30)
"""
READ_KEY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
keyctl = {"x86_64": 250, "aarch64": 219}[__import__("os").uname().machine]
found = libc.syscall(keyctl, 10, -3, b"user", b"polypilot-test", 0)  # KEYCTL_SEARCH the session keyring
print("FOUND" if found > 0 else "NOT FOUND")
"""


@bwrap_works
def test_the_users_session_keyring_is_not_the_agents(tmp_path: Path, settings: Settings, env: dict[str, str]) -> None:
    """The session keyring is inherited: a Kerberos ticket or another key in it was the
    sandboxed agent's to read."""
    if os.uname().machine not in ("x86_64", "aarch64"):
        pytest.skip("the test knows keyctl's number on x86_64 and aarch64 only")
    work = tmp_path / "work"
    work.mkdir()
    argv = launch_argv(plan_for(ON, work, AGENT, settings, env), [sys.executable, "-c", READ_KEY], work, env)
    done = subprocess.run(
        [sys.executable, "-c", KEYRING, json.dumps(argv)], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.stdout.strip() == "NOT FOUND", (done.stdout, done.stderr)


@bwrap_works
def test_a_config_file_the_repository_includes_from_its_folder_stays_read_only(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """Some projects share settings with ``git config include.path ../.gitconfig``: a file in
    the workspace that every git reads as config, where ``core.fsmonitor`` runs a command at
    the user's next ``git status`` (a shell prompt runs one on ``cd``)."""
    repo = GitRepo(tmp_path / "repo")
    repo.commit()
    (repo.root / ".gitconfig").write_text("[user]\n\tname = T\n")
    repo.git("config", "include.path", "../.gitconfig")
    repo.git("config", "includeIf.onbranch:main.path", "../.gitconfig-main")  # missing: made empty
    evil = "[core]\n\tfsmonitor = touch pwned\n"
    script = f"printf '{evil}' >> .gitconfig; printf '{evil}' > .gitconfig-main; echo x > ok.txt"
    argv = launch_argv(plan_for(ON, repo.root, AGENT, settings, env), ["sh", "-c", script], repo.root, env)
    subprocess.run(argv, env=env, cwd=repo.root, capture_output=True, timeout=30, check=False)
    assert (repo.root / "ok.txt").exists()  # the workspace itself: writable
    assert (repo.root / ".gitconfig").read_text() == "[user]\n\tname = T\n"
    assert (repo.root / ".gitconfig-main").read_text() == ""
