"""The bubblewrap launcher (agents/sandbox.py): the rules of a real checkout, the argv, and
what a real bwrap lets a shell do (write its worktree and commit; not the secrets, the state
folder or the hooks)."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from polypilot_tui.agents.base import BackendError
from polypilot_tui.agents.sandbox import (
    PROCESS_LIMIT,
    SandboxUnavailable,
    launch_argv,
    plan_for,
    rules_for,
    sandbox_problem,
    sandboxed,
)
from polypilot_tui.config import AgentConfig, Settings
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode
from tests.support.git_repo import GitRepo

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
        yield Settings(_env_file=None, state_dir=state)


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
    argv = sandboxed(["agent", "--acp"], rules, tree, bwrap="/usr/bin/bwrap")
    assert argv[0] == "/usr/bin/bwrap" and argv[-2:] == ["agent", "--acp"]
    for option in ("--unshare-all", "--share-net", "--die-with-parent", "--new-session"):
        assert option in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    ssh, worktree = str(Path(env["HOME"]) / ".ssh"), str(tree)
    hide, bind = argv.index(ssh), argv.index(worktree)
    assert argv[hide - 1] == "--tmpfs" and argv[bind - 1] == "--bind"
    socket = argv.index(str(settings.state_dir / "engine.sock"))
    assert argv[socket - 2 : socket] == ["--ro-bind", "/dev/null"]
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
