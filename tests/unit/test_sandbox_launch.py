"""The bubblewrap launcher (agents/sandbox.py): the rules of a real checkout, the argv, and
what a real bwrap lets a shell do (write its worktree and commit; not the secrets, the state
folder or the hooks)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from polypilot_tui.agents.base import BackendError
from polypilot_tui.agents.leash import SCAN
from polypilot_tui.agents.sandbox import (
    PROCESS_LIMIT,
    SandboxUnavailable,
    launch_argv,
    pids_cgroup_base,
    plan_for,
    rules_for,
    sandbox_problem,
    sandboxed,
)
from polypilot_tui.config import AgentConfig, Settings
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode, SandboxRules
from tests.support.git_repo import GitRepo
from tests.support.processes import sleeping
from tests.support.waiting import until_blocking

ON = Sandbox(SandboxMode.WORKSPACE)
bwrap_works = pytest.mark.skipif(sandbox_problem(ON) is not None, reason=f"no sandbox here: {sandbox_problem(ON)}")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("secret")
    (home / ".netrc").write_text("machine x password y")
    return home


@pytest.fixture
def env(home: Path, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(tmp_path / "no-runtime")}


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    state = tmp_path / "state"
    state.mkdir()
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # stands for the engine's socket
    listening.bind(str(state / "engine.sock"))
    listening.listen()
    (state / "sessions" / "s1").mkdir(parents=True)
    (state / "sessions" / "s1" / "agent-stderr.log").write_text("secret")
    with listening:
        yield Settings.read(None, state_dir=state)


AGENT = AgentConfig(name="a", kind="acp", sandbox_writable=["${COPILOT_HOME:-~/.copilot}"])


def worktree_of(tmp_path: Path) -> tuple[GitRepo, Path]:
    repo = GitRepo(tmp_path / "repo")
    repo.write("a.txt", "a\n")
    repo.commit()
    tree = tmp_path / "state" / "worktrees" / "w1"  # where polypilot makes them: in its hidden state folder
    repo.git("worktree", "add", "-q", "-b", "polypilot/w1", str(tree))
    return repo, tree


def test_a_worktree_may_write_what_git_needs_for_it_and_no_hook(
    tmp_path: Path, settings: Settings, env: dict[str, str], home: Path
) -> None:
    repo, tree = worktree_of(tmp_path)
    git = repo.root / ".git"
    rules = rules_for(ON, tree, AGENT, settings, env)
    assert rules.writable[0] == str(tree)
    for path in (
        tree / "src" / "x.py",
        git / "worktrees" / "w1" / "index",
        git / "objects" / "ab" / "cdef",
        git / "refs" / "heads" / "polypilot" / "w1",
        git / "logs" / "refs" / "heads" / "polypilot" / "w1",
        home / ".copilot" / "session-state" / "x",
    ):
        assert rules.may_write(str(path)), path
    for path in (
        git / "hooks" / "pre-commit",
        git / "config",
        git / "refs" / "heads" / "main",
        git / "HEAD",
        git / "worktrees" / "w1" / "commondir",
        git / "worktrees" / "w1" / "config.worktree",
        tree / ".git",
        home / ".ssh" / "authorized_keys",
        home / ".netrc",
        settings.state_dir / "engine.sock",
        settings.state_dir / "sessions.json",
        home / ".bashrc",
    ):
        assert not rules.may_write(str(path)), path
    # The state folder is hidden but for the worktree: each of its entries is.
    assert str(settings.state_dir / "engine.sock") in rules.hidden and str(home / ".ssh") in rules.hidden


def test_a_checkout_in_place_keeps_hooks_config_and_a_husky_folder_read_only(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.git("config", "core.hooksPath", ".husky")
    repo.commit()
    git = repo.root / ".git"
    rules = rules_for(ON, repo.root, AGENT, settings, env)
    assert rules.may_write(str(git / "index")) and rules.may_write(str(git / "refs" / "heads" / "main"))
    for path in (git / "hooks" / "post-checkout", git / "config", repo.root / ".husky" / "pre-commit"):
        assert not rules.may_write(str(path)), path


def test_the_argv_mounts_ancestors_first_and_makes_hidden_folders_read_only_last(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    _, tree = worktree_of(tmp_path)
    rules = rules_for(ON, tree, AGENT, settings, env)
    plan = plan_for(ON, tree, AGENT, settings, env)
    assert plan is not None and plan.rules == rules and plan.masked == (str(settings.state_dir),)
    argv = sandboxed(["agent", "--acp"], rules, tree, bwrap="/usr/bin/bwrap", masked=plan.masked)
    assert argv[0] == "/usr/bin/bwrap" and argv[-2:] == ["agent", "--acp"]
    for option in ("--unshare-all", "--share-net", "--die-with-parent", "--new-session"):
        assert option in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    ssh, worktree = str(Path(env["HOME"]) / ".ssh"), str(tree)
    hide, bind = argv.index(ssh), argv.index(worktree)
    assert argv[hide - 1] == "--tmpfs" and argv[bind - 1] == "--bind"
    state = argv.index(str(settings.state_dir))  # hidden whole, the worktree bound back into it
    assert argv[state - 1] == "--tmpfs" and state < bind and str(settings.state_dir / "engine.sock") not in argv
    remount = max(i for i, arg in enumerate(argv) if arg == "--remount-ro")
    assert remount > bind and argv[argv.index("--chdir") + 1] == worktree
    assert str(PROCESS_LIMIT) in argv


def test_without_bwrap_the_session_does_not_start_and_is_told_how_to_fix_it(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    no_bwrap = {**env, "PATH": str(tmp_path)}  # a PATH without bwrap
    said = sandbox_problem(ON, no_bwrap)
    assert said is not None and "apt install bubblewrap" in said
    assert sandbox_problem(Sandbox(), no_bwrap) is None  # off needs nothing
    plan = plan_for(ON, tmp_path, AGENT, settings, env)
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        launch_argv(plan, ["true"], tmp_path, no_bwrap)


def test_a_folder_that_holds_a_hidden_path_it_could_create_is_refused(
    tmp_path: Path, settings: Settings, env: dict[str, str], home: Path
) -> None:
    if sandbox_problem(ON, env) is not None:
        pytest.skip("no sandbox here")
    plan = plan_for(ON, home, AGENT, settings, env)  # the home folder itself: ~/.aws does not exist
    with pytest.raises(BackendError, match="cannot hide"):
        launch_argv(plan, ["true"], home, env)


@bwrap_works
def test_in_real_bwrap_a_shell_commits_in_its_worktree_and_cannot_touch_the_rest(
    tmp_path: Path, settings: Settings, env: dict[str, str], home: Path
) -> None:
    repo, tree = worktree_of(tmp_path)
    git = repo.root / ".git"
    plan = plan_for(ON, tree, AGENT, settings, env)
    (settings.state_dir / "sessions.json").write_text("{}")  # made after the plan: hidden all the same
    script = f"""
        echo new > made.txt && git add made.txt && git commit -q -m sandboxed && echo COMMITTED
        git status --short >/dev/null && echo STATUS
        for target in {home}/.ssh/evil {home}/.netrc {settings.state_dir}/evil {git}/hooks/pre-commit \\
                {git}/config {tree}/.git {git}/refs/heads/main {home}/.bashrc; do
            (echo x > "$target") 2>/dev/null && echo "WROTE $target"
        done
        cat {home}/.ssh/id_ed25519 2>/dev/null && echo READ-SECRET
        test -S {settings.state_dir}/engine.sock && echo SEES-SOCKET
        ls {settings.state_dir}/sessions | grep -q . && echo SEES-SESSIONS
        cat {settings.state_dir}/sessions.json 2>/dev/null && echo SEES-LIST
        grep 'Max processes' /proc/self/limits
        echo $$
    """
    env = {**env, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@x.invalid", "GIT_COMMITTER_NAME": "T"}
    env["GIT_COMMITTER_EMAIL"] = "t@x.invalid"
    argv = launch_argv(plan, ["sh", "-c", script], tree, env)
    done = subprocess.run(argv, env=env, cwd=tree, capture_output=True, text=True, timeout=30)
    out = done.stdout
    assert "COMMITTED" in out and "STATUS" in out, done.stderr
    assert "WROTE" not in out and "READ-SECRET" not in out and "SEES-" not in out, out
    assert f"{PROCESS_LIMIT}" in out.split("Max processes")[1].split("\n")[0]
    assert int(out.strip().splitlines()[-1]) <= 3, "the shell is not in a pid namespace of its own"
    assert repo.git("log", "-1", "--format=%s", "polypilot/w1").decode().strip() == "sandboxed"
    assert not (home / ".ssh" / "evil").exists() and not (settings.state_dir / "evil").exists()
    assert (home / ".ssh" / "id_ed25519").read_text() == "secret" and (tree / ".git").read_text().startswith("gitdir:")
    assert not (git / "hooks" / "pre-commit").exists() and not (home / ".bashrc").exists()


APP = """
import json, subprocess, sys, time
from polypilot_tui.agents.leash import leashed
subprocess.Popen(leashed(json.loads(sys.argv[1])), stdin=subprocess.DEVNULL)
time.sleep(120)
"""


@bwrap_works
def test_a_background_process_left_in_the_sandbox_ends_with_bwrap_and_with_a_sigkilled_app(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """A tool's ``setsid`` process leaves its agent's session and group: the kill of the agent
    (bwrap: its pid namespace ends with its init) and the app's SIGKILL (the leash) end it."""
    work = tmp_path / "work"
    work.mkdir()
    plan = plan_for(ON, work, AGENT, settings, env)
    for how, marker in (("bwrap killed", f"47.{os.getpid() % 997}1"), ("app SIGKILLed", f"47.{os.getpid() % 997}2")):
        argv = launch_argv(plan, ["sh", "-c", f"(setsid sleep {marker} &); exec sleep 119"], work, env)
        if how == "bwrap killed":
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
        else:
            proc = subprocess.Popen(
                [sys.executable, "-c", APP, json.dumps(argv)], env=env, cwd=Path(__file__).parents[2]
            )
        try:
            until_blocking(lambda m=marker: sleeping(m), 10, f"the background sleep ({how})")
            time.sleep(3 * SCAN)  # the leash's watcher looks every SCAN s
            proc.send_signal(signal.SIGKILL)
            proc.wait(5)
            until_blocking(lambda m=marker: not sleeping(m), 5, f"the background sleep to end ({how})")
        finally:
            for pid in sleeping(marker):
                os.kill(pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.kill()


@pytest.mark.parametrize(
    ("sysctl", "value", "fix"),
    [
        ("/proc/sys/user/max_user_namespaces", "0", "sysctl -w user.max_user_namespaces="),
        ("/proc/sys/kernel/unprivileged_userns_clone", "0", "sysctl -w kernel.unprivileged_userns_clone=1"),
    ],
)
def test_user_namespaces_turned_off_are_named_with_the_sysctl_that_turns_them_on(
    monkeypatch: pytest.MonkeyPatch, sysctl: str, value: str, fix: str
) -> None:
    import polypilot_tui.agents.sandbox as launcher

    real = launcher.read_sysctl  # one layer faked: the kernel setting read
    monkeypatch.setattr(launcher, "read_sysctl", lambda path: value if path == sysctl else real(path))
    said = sandbox_problem(ON)
    if launcher.find_bwrap() is None:
        pytest.skip("no bwrap here: that is said first")
    assert said is not None and fix in said


@bwrap_works
def test_an_agent_that_lives_in_tmp_still_starts_in_the_private_tmp(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """A program in /tmp needs more than its own file (a venv's packages, a Node package's
    tree; polypilot itself, from a clean clone in /tmp): its tree there is shown read-only."""
    assert str(tmp_path).startswith("/tmp/")
    program = tmp_path / "npx-cache" / "bin" / "agent"  # where an npx-started agent may be unpacked
    library = tmp_path / "npx-cache" / "lib" / "words.sh"  # a file of its package beside its own
    program.parent.mkdir(parents=True)
    library.parent.mkdir()
    library.write_text("echo STARTED\n")
    program.write_text(f"#!/bin/sh\n. {library}\n")
    program.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    argv = launch_argv(plan_for(ON, work, AGENT, settings, env), [str(program)], work, env)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert done.stdout == "STARTED\n", done.stderr
    # an interpreter of a venv in /tmp (a link out of it), as a clean clone's is
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    argv = sandboxed([str(venv / "python"), "-I", "-c", "print('IN')"], SandboxRules(writable=(str(work),)), work)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert done.stdout == "IN\n", done.stderr


def test_a_separate_git_folder_is_writable_but_its_hooks_config_and_pointer(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """``git init --separate-git-dir`` (and a submodule) has a ``.git`` file and no
    ``commondir``: its git folder is its own common folder, not the one above it."""
    work, git_dir = tmp_path / "work", tmp_path / "elsewhere" / "work.git"
    git_dir.parent.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", "--separate-git-dir", str(git_dir), str(work)], check=True)
    rules = rules_for(ON, work, AGENT, settings, env)
    assert rules.may_write(str(git_dir / "index")) and rules.may_write(str(git_dir / "refs" / "heads" / "main"))
    for path in (git_dir / "hooks" / "pre-commit", git_dir / "config", work / ".git", tmp_path / "elsewhere" / "x"):
        assert not rules.may_write(str(path)), path


@bwrap_works
def test_the_process_limit_holds_in_the_sandbox_as_root_too_where_a_cgroup_can_be_made(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    """RLIMIT_NPROC binds a user (per user namespace); root is exempt from it, so as root the
    sandbox is started in a pids cgroup of its own (docs/sandbox.md: the process limit)."""
    if os.getuid() == 0 and pids_cgroup_base() is None:
        pytest.skip("root without a pids cgroup to make: no process limit (documented)")
    work = tmp_path / "work"
    work.mkdir()
    forks = "for i in $(seq 60); do sleep 0.5 & done; wait; echo DONE"  # 60 at once, 20 allowed
    argv = launch_argv(plan_for(ON, work, AGENT, settings, env), ["sh", "-c", forks], work, env, process_limit=20)
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        assert "Cannot fork" in done.stderr, (done.stdout, done.stderr)
    finally:
        if os.getuid() == 0:
            procs = next(arg for arg in argv if arg.endswith("/cgroup.procs"))
            until_blocking(lambda: not Path(procs).read_text().strip(), 10, "the sandbox's cgroup to empty")
            Path(procs).parent.rmdir()


@bwrap_works
def test_a_lower_hard_process_limit_is_kept_and_a_gone_folder_is_not_made_again(
    tmp_path: Path, settings: Settings, env: dict[str, str]
) -> None:
    import resource

    work = tmp_path / "work"
    work.mkdir()
    argv = launch_argv(
        plan_for(ON, work, AGENT, settings, env), ["grep", "Max processes", "/proc/self/limits"], work, env
    )

    def lower() -> None:  # a user whose hard limit is below the sandbox's: raising it is refused
        resource.setrlimit(resource.RLIMIT_NPROC, (1000, 1000))

    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, preexec_fn=lower)
    assert done.stdout.split()[2:4] == ["1000", "1000"], (done.stdout, done.stderr)
    plan = plan_for(ON, work, AGENT, settings, env)
    work.rmdir()  # its worktree discarded meanwhile
    launch_argv(plan, ["true"], tmp_path, env)
    assert not work.exists() and (Path(env["HOME"]) / ".copilot").is_dir()  # the agent's own folder is made
