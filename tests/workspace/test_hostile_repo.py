"""No program a repository names runs from the app's own git calls; what the user asks for
runs as git would; neither the user's config nor inherited GIT_* variables break a diff.

Real repositories, real scripts: each program a repository names leaves a mark when it runs
(tests/workspace/hostile.py). Each test first shows that plain git does run them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from polypilot_tui.domain.changeset import ChangeStats, FileStatus
from polypilot_tui.workspace.changes import change_stats, changeset, diff_text
from polypilot_tui.workspace.finish import (
    commit_all,
    discard,
    draft_commit_message,
    open_pull_request,
    prune_orphans,
    push_branch,
    worktree_state,
)
from polypilot_tui.workspace.git import WorkspaceError, git, untrusted_settings
from polypilot_tui.workspace.worktrees import create_worktree, folder_problem, in_place, inspect_folder
from tests.support.http_server import local_server
from tests.workspace.hostile import Marks, hostile_repo
from tests.workspace.repos import commit, make_repo, run


def edit(folder: Path) -> None:
    """A change to every kind of file the repository filters, and a new one."""
    (folder / "a.txt").write_text("one\ntwo\nthree\n")
    (folder / "notes.md").write_text("# notes\nmore\n")
    (folder / "new.txt").write_text("brand new\n")


async def test_the_apps_git_calls_run_nothing_a_repository_names(tmp_path: Path) -> None:
    repo, marks = hostile_repo(tmp_path)
    edit(repo)
    here = in_place(await inspect_folder(str(repo)))
    assert await change_stats(here) == ChangeStats(3, 3, 0)
    text = (await diff_text(here)).text
    assert "+three" in text and "+more" in text and "+brand new" in text
    assert {f.path for f in (await changeset(here)).files} == {"a.txt", "notes.md", "new.txt"}

    root = tmp_path / "worktrees"
    tree = await create_worktree(await inspect_folder(str(repo)), "polypilot/one", "", root)
    assert Path(tree.folder, "a.txt").read_text() == "one\ntwo\n"
    edit(Path(tree.folder))
    assert await change_stats(tree) == ChangeStats(3, 3, 0)
    assert "+three" in (await diff_text(tree)).text
    assert await folder_problem(tree) == ""
    assert (await worktree_state(tree)).uncommitted == 3
    assert "- new.txt" in await draft_commit_message(tree, [])
    assert "removed" in await discard(tree, force=True)
    orphan = await create_worktree(await inspect_folder(str(repo)), "polypilot/orphan", "", root)
    assert await prune_orphans(str(repo), root, lambda: set()) == [orphan.folder]
    assert marks.ran() == []

    # The repository is armed: git run as a user runs would run them.
    run(repo, "diff", "HEAD", "--", "a.txt")  # not notes.md: the process filter fails git itself
    run(repo, "branch", "armed")
    assert {"filter-clean", "diff-driver", "fsmonitor", "hook-reference-transaction"} <= set(marks.ran())


async def test_a_repository_cannot_bring_back_what_the_user_left_out(tmp_path: Path) -> None:
    """Inherited GIT_* variables point nowhere and inject nothing: GIT_DIR, GIT_INDEX_FILE,
    GIT_EXTERNAL_DIFF, config through GIT_CONFIG_PARAMETERS and GIT_CONFIG_COUNT."""
    marks = Marks(tmp_path)
    repo = make_repo(tmp_path / "repo", {"a.txt": "one\n"})
    other = make_repo(tmp_path / "other", {"b.txt": "other\n"})
    (repo / "a.txt").write_text("one\ntwo\n")
    (repo / "new.txt").write_text("new\n")
    env = {
        "GIT_DIR": str(other / ".git"),
        "GIT_WORK_TREE": str(other),
        "GIT_INDEX_FILE": str(tmp_path / "no-index"),
        "GIT_EXTERNAL_DIFF": marks.program("env-external-diff"),
        "GIT_CONFIG_PARAMETERS": f"'core.fsmonitor'='{marks.program('env-fsmonitor')}'",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.hooksPath",
        "GIT_CONFIG_VALUE_0": str(marks.bin),
    }
    marks.program("post-index-change")
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        here = in_place(await inspect_folder(str(repo)))
        assert here.repo == str(repo)
        assert await change_stats(here) == ChangeStats(2, 2, 0)
        diff = (await diff_text(here)).text
        assert "+two" in diff and "+new" in diff
    assert marks.ran() == []


def user_config(home: Path, marks: Marks) -> None:
    """A ~/.gitconfig with an external diff (difftastic, say) and output settings we must not
    depend on."""
    (home / ".gitconfig").write_text(
        "[diff]\n"
        f"\texternal = {marks.program('user-diff-external')}\n"
        "\tnoprefix = true\n"
        "\tmnemonicPrefix = true\n"
        "\trelative = true\n"
        "[color]\n\tui = always\n"
        "[core]\n"
        f"\tpager = {marks.program('user-pager')}\n"
    )


async def test_a_user_level_external_diff_still_shows_new_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    marks = Marks(tmp_path)
    user_config(home, marks)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    repo = make_repo(tmp_path / "repo", {"src/app.py": "x = 1\n"})
    (repo / "src" / "app.py").write_text("x = 2\n")
    (repo / "src" / "new.py").write_text("print('new')\n")
    here = in_place(await inspect_folder(str(repo / "src")))
    diff = await diff_text(here)
    assert "+++ b/src/new.py" in diff.text and "+print('new')" in diff.text
    assert "--- a/src/app.py" in diff.text and "+x = 2" in diff.text
    changes = await changeset(here)
    kinds = {f.path: f.status for f in changes.files}
    assert kinds == {"src/app.py": FileStatus.MODIFIED, "src/new.py": FileStatus.UNTRACKED}
    assert marks.ran() == []
    out = subprocess.run(["git", "diff"], cwd=repo, capture_output=True, check=True)
    assert b"+x = 2" not in out.stdout and marks.ran() == ["user-diff-external"]  # what broke `polypilot diff`


async def test_the_users_own_filter_runs_and_a_repository_cannot_redefine_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git-lfs lives in ~/.gitconfig: a new worktree of an LFS repository needs its smudge.
    The repository's own redefinition of that driver is undone back to the user's."""
    home = tmp_path / "home"
    home.mkdir()
    marks = Marks(tmp_path)
    smudge = marks.bin / "user-smudge"
    smudge.write_text(f"#!/bin/sh\ntouch '{marks.folder}/user-smudge'\nsed 's/pointer/content/'\n")
    smudge.chmod(0o755)
    (home / ".gitconfig").write_text(f'[filter "lfs"]\n\tsmudge = {smudge}\n\tclean = cat\n\trequired = true\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")  # a machine's git-lfs sets its process filter there
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    repo = make_repo(tmp_path / "repo", {"big.bin": "pointer\n", ".gitattributes": "*.bin filter=lfs\n"})
    run(repo, "config", "filter.lfs.smudge", marks.program("repo-smudge", filter_=True))
    run(repo, "config", "filter.lfs.clean", marks.program("repo-clean", filter_=True))
    marks.clear()
    tree = await create_worktree(await inspect_folder(str(repo)), "lfs", "", tmp_path / "wt")
    assert Path(tree.folder, "big.bin").read_text() == "content\n"
    assert marks.ran() == ["user-smudge"]


def test_untrusted_settings_keeps_the_users_values_and_blanks_the_rest() -> None:
    listing = (
        "global\0filter.lfs.smudge\ngit-lfs smudge\0"
        "global\0filter.lfs.process\ngit-lfs process\0"
        "global\0filter.lfs.required\ntrue\0"
        "local\0filter.lfs.smudge\nevil\0"
        "local\0filter.a.b=c.clean\nevil\0"
        "system\0filter.sys.clean\nfine\0"
        "worktree\0filter.wt.required\ntrue\0"
    )
    settings = dict(untrusted_settings(listing))
    assert settings == {
        "filter.lfs.smudge": "git-lfs smudge",  # the user's, back
        "filter.a.b=c.clean": "",
        "filter.wt.required": "",
    }
    # A process filter the user does not have: set at all, git would skip the user's clean
    # and smudge, so the whole driver goes, and is not required.
    mine = "global\0filter.x.clean\nmine\0global\0filter.x.required\ntrue\0local\0filter.x.process\nevil\0"
    assert dict(untrusted_settings(mine)) == {f"filter.x.{k}": "" for k in ("clean", "smudge", "process", "required")}


def test_untrusted_settings_blank_lfs_where_the_repository_names_an_lfs_program() -> None:
    """git-lfs, the user's filter, reads the repository's config too, and finds its programs'
    keys anywhere in a name (``remote.lfs.customtransfer.x.path`` defines a transfer)."""
    users = "global\0filter.lfs.process\ngit-lfs filter-process\0global\0filter.lfs.required\ntrue\0"
    for key in (
        "lfs.extension.evil.clean",
        "lfs.customtransfer.x.path",
        "remote.lfs.customtransfer.x.path",
        "lfs.standalonetransferagent",
        "lfs.https://lfs.example.com.standalonetransferagent",
    ):
        settings = dict(untrusted_settings(users + f"local\0{key}\nevil\0"))
        assert settings == {f"filter.lfs.{k}": "" for k in ("clean", "smudge", "process", "required")}, key
    assert untrusted_settings(users + "local\0lfs.url\nhttps://lfs.example.com\0") == []  # names no program
    assert untrusted_settings("global\0lfs.customtransfer.mine.path\nmine\0" + users) == []  # the user's own


def users_git_lfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of the test's own where git-lfs is set up as ``git lfs install`` does (skip
    without git-lfs; on CI it must be there); the machine's config is left out."""
    if shutil.which("git-lfs") is None:
        message = "git-lfs is missing (apt-get install git-lfs)"
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail(f"{message} (CI=true: the test must run)")
        pytest.skip(message)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    subprocess.run(["git", "lfs", "install", "--skip-repo"], check=True, capture_output=True)
    return home


LFS_ATTRIBUTES = "*.bin filter=lfs diff=lfs merge=lfs -text\n"


async def test_the_users_git_lfs_runs_no_extension_the_repository_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An extension runs on clean (a diff) and on smudge (a checkout: its pointer names it).
    The app's count and its new worktree (left as pointer files) run it neither time."""
    users_git_lfs(tmp_path, monkeypatch)
    marks = Marks(tmp_path)
    repo = make_repo(tmp_path / "repo", {".gitattributes": LFS_ATTRIBUTES})
    for item, change in (("clean", "a-z A-Z"), ("smudge", "A-Z a-z")):  # git-lfs notes a change only
        script = marks.bin / f"lfs-extension-{item}"
        script.write_text(f"#!/bin/sh\ntouch '{marks.folder / 'lfs-extension'}'\nexec tr {change}\n")
        script.chmod(0o755)
        run(repo, "config", f"lfs.extension.evil.{item}", str(script))
    run(repo, "config", "lfs.extension.evil.priority", "0")
    (repo / "big.bin").write_text("payload\n")
    commit(repo, "stored through the extension")
    assert "ext-0-evil" in run(repo, "show", "HEAD:big.bin")
    marks.clear()
    (repo / "big.bin").write_text("payload\nmore\n")
    here = in_place(await inspect_folder(str(repo)))
    assert (await change_stats(here)).files == 1  # the file against its pointer: lfs is left out
    tree = await create_worktree(await inspect_folder(str(repo)), "ext", "", tmp_path / "wt")
    assert Path(tree.folder, "big.bin").read_text().startswith("version https://git-lfs")  # not filled
    assert marks.ran() == []
    run(repo, "diff", "--stat")  # armed: git as the user runs it runs the extension
    assert marks.ran() == ["lfs-extension"]
    marks.clear()
    run(Path(tree.folder), "lfs", "checkout")  # …and so does the fill, were it left to run
    assert marks.ran() == ["lfs-extension"]


async def test_a_new_worktree_of_an_lfs_repository_has_its_stored_files_and_downloads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new worktree's LFS files come from the objects stored here. What is missing stays a
    pointer file: the server is the repository's choice (its ``.lfsconfig``, content), and
    so would be the transfer program its answer names; nothing asks for credentials."""
    users_git_lfs(tmp_path, monkeypatch)
    marks = Marks(tmp_path)
    repo = make_repo(tmp_path / "repo", {"big.bin": "payload\n", ".gitattributes": LFS_ATTRIBUTES})
    tree = await create_worktree(await inspect_folder(str(repo)), "stored", "", tmp_path / "wt")
    assert Path(tree.folder, "big.bin").read_text() == "payload\n"  # filled from the store
    assert await change_stats(tree) == ChangeStats(0, 0, 0)

    with local_server(lambda path: b"{}") as server:
        (repo / ".lfsconfig").write_text(f"[lfs]\n\turl = http://127.0.0.1:{server.port}/info/lfs\n")
        (repo / "more.bin").write_text("not stored\n")
        commit(repo, "more")
        oid = lfs_oid(repo, "more.bin")
        (repo / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid).unlink()  # to be downloaded…
        (repo / "more.bin").unlink()  # …and not cleaned back into the store from the checkout
        run(repo, "config", "credential.helper", marks.program("credential-helper"))
        run(repo, "config", "core.askPass", marks.program("askpass"))
        tree = await create_worktree(await inspect_folder(str(repo)), "missing", "", tmp_path / "wt")
        assert Path(tree.folder, "more.bin").read_text().startswith("version https://git-lfs.github.com/spec/v1")
        assert Path(tree.folder, "big.bin").read_text() == "payload\n"
        assert server.asked == 0 and marks.ran() == []
        armed = subprocess.run(["git", "worktree", "add", str(tmp_path / "plain")], cwd=repo, capture_output=True)
        assert armed.returncode != 0 and server.asked > 0  # git as the user runs it asks the server


def lfs_oid(repo: Path, name: str) -> str:
    """The LFS object id a committed pointer file names."""
    pointer = run(repo, "show", f"HEAD:{name}")
    return next(line.split(":", 1)[1] for line in pointer.splitlines() if line.startswith("oid sha256:"))


async def test_what_the_user_asks_for_runs_the_repositorys_hooks_as_git_would(tmp_path: Path) -> None:
    """Commit (and merge, push) are the user's own git commands: their pre-commit runs. The
    app's calls around them (status, the draft, the state) run no hook."""
    marks = Marks(tmp_path)
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "hooked", "", tmp_path / "wt")
    hooks = repo / ".git" / "hooks"
    for hook in ("pre-commit", "post-index-change", "reference-transaction"):
        Path(marks.program(f"hook-{hook}")).rename(hooks / hook)
    Path(tree.folder, "work.txt").write_text("work\n")
    await worktree_state(tree)
    await draft_commit_message(tree, ["add work"])
    assert marks.ran() == []
    await commit_all(tree, "Add work")
    assert "hook-pre-commit" in marks.ran()


async def test_a_push_never_runs_a_command_as_transport(tmp_path: Path) -> None:
    marks = Marks(tmp_path)
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "out", "", tmp_path / "wt")
    ext = marks.program("ext-transport")
    run(repo, "config", "protocol.ext.allow", "always")
    run(repo, "remote", "add", "evil", f"ext::{ext} %S")
    with pytest.raises(WorkspaceError, match="push to evil failed"):
        await push_branch(tree, "evil")
    assert marks.ran() == []


async def test_the_apps_calls_reach_no_transport(tmp_path: Path) -> None:
    """A fetch behind the app's back (a partial clone's lazy fetch) would run the remote's
    programs: every app call refuses any protocol."""
    repo = make_repo(tmp_path / "repo")
    bare = tmp_path / "bare.git"
    run(tmp_path, "init", "--quiet", "--bare", str(bare))
    run(repo, "remote", "add", "origin", str(bare))
    fetched = await git(["fetch", "origin"], str(repo), check=False)
    assert not fetched.ok and "transport 'file' not allowed" in fetched.err
    assert (await git(["push", "origin", "main"], str(repo), check=False, user_asked=True)).ok


def starts_git(text: str) -> bool:
    """Whether a module's source starts a process and names the git command."""
    starters = ("create_subprocess_exec", "subprocess.run", "subprocess.Popen", "check_output", "os.system")
    return any(s in text for s in starters) and any(n in text for n in ('"git"', "'git'", '"git",'))


def test_every_git_call_goes_through_the_one_builder() -> None:
    """No module but workspace/git.py starts a process named git."""
    package = Path(__file__).resolve().parents[2] / "polypilot_tui"
    builder = package / "workspace" / "git.py"
    assert starts_git(builder.read_text())  # the check sees the one place that does
    offenders = [
        str(p.relative_to(package)) for p in package.rglob("*.py") if p != builder and starts_git(p.read_text())
    ]
    assert offenders == []


async def test_gh_gets_the_same_environment_as_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gh pr create` runs git itself: nothing the app's git does not get leaks into it."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    seen = tmp_path / "gh-env"
    (bin_ / "gh").write_text(f"#!/bin/sh\nenv > '{seen}'\necho https://example.invalid/pull/1\n")
    (bin_ / "gh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "pr", "", tmp_path / "wt")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", "/bin/false")
    assert await open_pull_request(tree, "Title", "Body") == "https://example.invalid/pull/1"
    env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert "GIT_DIR" not in env and "GIT_EXTERNAL_DIFF" not in env
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["PATH"].startswith(str(bin_))


async def test_programs_named_in_a_file_the_repository_includes_run_neither(tmp_path: Path) -> None:
    """``include.path`` and ``includeIf`` bring keys in from another file (one a checked-out
    file of the repository could be): they are the repository's too, whatever file holds them."""
    marks = Marks(tmp_path)
    repo = make_repo(tmp_path / "repo", {".gitattributes": "*.txt filter=inc diff=inc\n", "a.txt": "one\n"})
    included = tmp_path / "included.cfg"
    conditional = tmp_path / "conditional.cfg"
    included.write_text(
        f'[filter "inc"]\n\tclean = {marks.program("inc-clean", filter_=True)}\n'
        f"\tsmudge = {marks.program('inc-smudge', filter_=True)}\n"
        f'[diff "inc"]\n\ttextconv = {marks.program("inc-textconv")}\n'
    )
    conditional.write_text(
        f"[core]\n\tfsmonitor = {marks.program('inc-fsmonitor')}\n"
        f"\thooksPath = {marks.bin}\n[diff]\n\texternal = {marks.program('inc-external')}\n"
    )
    Path(marks.program("post-checkout")).chmod(0o755)  # a hook in the included hooksPath
    run(repo, "config", "include.path", str(included))
    run(repo, "config", f"includeIf.gitdir:{repo}/.path", str(conditional))
    (repo / "a.txt").write_text("one\ntwo\n")
    here = in_place(await inspect_folder(str(repo)))
    assert await change_stats(here) == ChangeStats(1, 1, 0)
    assert "+two" in (await diff_text(here)).text
    tree = await create_worktree(await inspect_folder(str(repo)), "polypilot/inc", "", tmp_path / "trees")
    assert Path(tree.folder, "a.txt").read_text() == "one\n"
    assert marks.ran() == []

    run(repo, "diff", "--", "a.txt")  # armed: git as the user runs it runs them
    assert {"inc-clean", "inc-fsmonitor", "inc-external"} <= set(marks.ran())
