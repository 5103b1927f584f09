"""Worktrees, change counts and finishing, on real git repositories in a temporary folder."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from polypilot_tui.domain.changeset import ChangeStats, FileStatus
from polypilot_tui.domain.workspace import MAX_LISTED, Isolation, WorktreeState, branch_name_for
from polypilot_tui.engine.registry_sync import workspace_fields, workspace_of
from polypilot_tui.storage.registry import SessionRecord
from polypilot_tui.storage.store import Store
from polypilot_tui.workspace.changes import change_stats, changeset, diff_text, untracked
from polypilot_tui.workspace.finish import (
    commit_all,
    discard,
    draft_commit_message,
    merge_into_base,
    prune_orphans,
    push_branch,
    repos_under,
    unmake,
    worktree_state,
)
from polypilot_tui.workspace.git import GitMissing, WorkspaceError, git
from polypilot_tui.workspace.worktrees import (
    create_worktree,
    folder_problem,
    in_place,
    inspect_folder,
)
from tests.workspace.repos import commit, make_repo, run


async def test_a_folder_is_described_as_it_is(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    info = await inspect_folder(str(plain))
    assert (info.folder, info.is_git) == (str(plain), False)
    repo = make_repo(tmp_path / "repo")
    (repo / "sub").mkdir()
    info = await inspect_folder(str(repo / "sub"))
    assert (info.repo, info.branch, info.dirty) == (str(repo), "main", False)
    assert len(info.head) == 40
    (repo / "new.txt").write_text("x\n")
    assert (await inspect_folder(str(repo))).dirty
    run(repo, "checkout", "--quiet", "--detach")
    assert (await inspect_folder(str(repo))).branch == ""
    with pytest.raises(WorkspaceError, match="does not exist"):
        await inspect_folder(str(tmp_path / "nowhere"))
    with pytest.raises(WorkspaceError, match="is not a folder"):
        await inspect_folder(str(repo / "README.md"))


async def test_two_worktrees_edit_the_same_file_without_touching_each_other(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "draft.txt").write_text("uncommitted in the checkout\n")  # a dirty base stays where it is
    info = await inspect_folder(str(repo))
    root = tmp_path / "worktrees"
    one = await create_worktree(info, "polypilot/one", "", root)
    two = await create_worktree(info, branch_name_for("Fix the login bug!"), "main", root)
    assert two.branch == "polypilot/fix-the-login-bug"
    assert (one.isolation, one.base, one.base_commit) == (Isolation.WORKTREE, "main", info.head)
    assert Path(one.folder).parent.stat().st_mode & 0o777 == 0o700
    Path(one.folder, "README.md").write_text("one's version\n")
    Path(two.folder, "README.md").write_text("two's version\nwith two lines\n")
    assert (repo / "README.md").read_text() == "hello\n"
    assert Path(one.folder, "README.md").read_text() == "one's version\n"
    assert not Path(one.folder, "draft.txt").exists()
    assert await change_stats(one) == ChangeStats(1, 1, 1)
    assert await change_stats(two) == ChangeStats(1, 2, 1)
    assert await change_stats(in_place(info)) == ChangeStats(1, 1, 0)  # the untracked draft


async def test_bad_worktree_requests_are_refused_in_words(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    info = await inspect_folder(str(repo))
    root = tmp_path / "worktrees"
    run(repo, "branch", "taken")
    with pytest.raises(WorkspaceError, match="'taken' exists already"):
        await create_worktree(info, "taken", "", root)
    with pytest.raises(WorkspaceError, match="not a valid branch name"):
        await create_worktree(info, "two..dots", "", root)
    with pytest.raises(WorkspaceError, match="not a valid branch name"):  # git push would force "+main"
        await create_worktree(info, "+main", "", root)
    with pytest.raises(WorkspaceError, match="neither a branch nor a commit"):
        await create_worktree(info, "fine", "no-such-base", root)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorkspaceError, match="not in a git repository"):
        await create_worktree(await inspect_folder(str(plain)), "b", "", root)
    empty = tmp_path / "empty"
    run(tmp_path, "init", "--quiet", "-b", "main", str(empty))
    with pytest.raises(WorkspaceError, match="has no commits yet"):
        await create_worktree(await inspect_folder(str(empty)), "b", "", root)
    run(repo, "checkout", "--quiet", "--detach")  # a detached HEAD starts from its commit
    detached = await create_worktree(await inspect_folder(str(repo)), "from-detached", "", root)
    assert detached.base_commit == info.head and detached.base == info.head


async def test_changes_count_committed_uncommitted_untracked_binary_and_renamed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={"a.txt": "1\n2\n3\n", "old.txt": "same\n" * 20})
    info = await inspect_folder(str(repo))
    tree = await create_worktree(info, "work", "", tmp_path / "wt")
    folder = Path(tree.folder)
    (folder / "a.txt").write_text("1\n2\n3\n4\n")
    commit(folder, "four")
    (folder / "a.txt").write_text("1\n3\n4\n")  # and an uncommitted change on top
    run(folder, "mv", "old.txt", "renamed.txt")
    (folder / "image.bin").write_bytes(b"\x00\x01binary")
    (folder / "caf\xe9.txt".encode("latin-1").decode("utf-8", "surrogateescape")).write_bytes(b"x\ny\n")
    stats = await change_stats(tree)
    assert stats == ChangeStats(files=4, added=3, removed=1), stats  # a.txt +1 −1 net; rename 0; bin 0; new +2
    diff = await diff_text(tree)
    text = diff.text
    assert not diff.truncated and "rename from old.txt" in text and "+4" in text and "Binary files" in text
    assert "\ufffd.txt" in text or "caf" in text  # a name that is not UTF-8 is shown, not dropped
    changes = await changeset(tree)
    assert changes.base == "main" and changes.stats == stats
    kinds = {f.path: f.status for f in changes.files}
    assert kinds["renamed.txt"] is FileStatus.RENAMED and kinds["image.bin"] is FileStatus.UNTRACKED


async def test_commit_merge_and_the_base_moves(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "feature", "", tmp_path / "wt")
    Path(tree.folder, "feature.txt").write_text("new\n")
    message = await draft_commit_message(tree, ["add the feature file"])
    assert message == "Add the feature file\n\n- feature.txt"
    sha = await commit_all(tree, message)
    with pytest.raises(WorkspaceError, match="nothing to commit"):
        await commit_all(tree, "again")
    assert await worktree_state(tree) == WorktreeState(uncommitted=0, ahead=1, unpushed=1)
    result = await merge_into_base(tree, fast_forward_only=True)
    assert result.merged, result.message
    assert run(repo, "rev-parse", "main") == sha
    assert (await worktree_state(tree)).merged
    assert await discard(tree)  # nothing at risk any more: no confirmation needed
    assert not Path(tree.folder).exists()
    assert run(repo, "branch", "--list", "feature") == ""


async def test_a_conflict_is_undone_and_reported_and_nothing_is_lost(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "clash", "", tmp_path / "wt")
    Path(tree.folder, "README.md").write_text("the branch's line\n")
    branch_commit = await commit_all(tree, "branch edit")
    (repo / "README.md").write_text("the base's line\n")
    base_commit = commit(repo, "base edit")
    result = await merge_into_base(tree, fast_forward_only=True)
    assert not result.merged and "cannot simply move forward" in result.message and not result.conflicts
    result = await merge_into_base(tree)
    assert not result.merged and result.conflicts == ("README.md",)
    assert "undone" in result.message
    assert run(repo, "rev-parse", "HEAD") == base_commit and (repo / "README.md").read_text() == "the base's line\n"
    assert run(repo, "status", "--porcelain") == ""
    assert run(Path(tree.folder), "rev-parse", "HEAD") == branch_commit


async def test_merge_needs_the_base_checked_out_and_clean(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "topic", "", tmp_path / "wt")
    Path(tree.folder, "t.txt").write_text("t\n")
    with pytest.raises(WorkspaceError, match="uncommitted file"):
        await merge_into_base(tree)
    await commit_all(tree, "t")
    (repo / "README.md").write_text("dirty\n")
    with pytest.raises(WorkspaceError, match="uncommitted changes"):
        await merge_into_base(tree)
    run(repo, "checkout", "--quiet", "-b", "elsewhere")
    with pytest.raises(WorkspaceError, match="has elsewhere checked out, not main"):
        await merge_into_base(tree)


async def test_push_to_a_bare_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    bare = tmp_path / "remote.git"
    run(tmp_path, "init", "--quiet", "--bare", str(bare))
    run(repo, "remote", "add", "origin", str(bare))
    tree = await create_worktree(await inspect_folder(str(repo)), "to-push", "", tmp_path / "wt")
    Path(tree.folder, "p.txt").write_text("p\n")
    sha = await commit_all(tree, "p")
    assert (await worktree_state(tree)).unpushed == 1
    assert "pushed to origin" in await push_branch(tree)
    assert run(bare, "rev-parse", "to-push") == sha
    assert (await worktree_state(tree)).unpushed == 0
    with pytest.raises(WorkspaceError, match="push to nowhere failed"):
        await push_branch(tree, "nowhere")


async def test_discard_asks_before_throwing_work_away(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "risky", "", tmp_path / "wt")
    Path(tree.folder, "work.txt").write_text("hours of work\n")
    with pytest.raises(WorkspaceError, match=r"1 uncommitted file \(new: work.txt\); nothing was removed"):
        await discard(tree)
    assert Path(tree.folder, "work.txt").exists()
    await commit_all(tree, "work")
    with pytest.raises(WorkspaceError, match="1 commit neither merged nor pushed"):
        await discard(tree)
    assert "removed" in await discard(tree, force=True)
    assert not Path(tree.folder).exists()
    with pytest.raises(WorkspaceError, match="a folder of yours is left alone"):
        await discard(in_place(await inspect_folder(str(repo))))


async def test_a_worktree_deleted_behind_our_back_is_named_and_pruned(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    root = tmp_path / "wt"
    info = await inspect_folder(str(repo))
    gone = await create_worktree(info, "gone", "", root)
    merged = await create_worktree(info, "merged", "", root)
    busy = await create_worktree(info, "busy", "", root)
    in_use = await create_worktree(info, "in-use", "", root)
    Path(busy.folder, "w.txt").write_text("work\n")
    assert await folder_problem(gone) == ""
    subprocess.run(["rm", "-rf", gone.folder], check=True)
    assert "is gone" in await folder_problem(gone)
    removed = await prune_orphans(str(repo), root, lambda: {in_use.folder})
    assert sorted(removed) == sorted([gone.folder, merged.folder])  # busy has work; in-use is a session's
    assert Path(busy.folder, "w.txt").exists() and Path(in_use.folder).exists()
    assert run(repo, "branch", "--list", "gone") != ""  # its commits may matter: kept
    assert await repos_under(root) == {str(repo)}  # found again from the worktrees themselves
    assert await repos_under(tmp_path / "nothing-here") == set()


async def test_without_git_the_message_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GitMissing, match="git is not installed"):
        await git(["status"], str(tmp_path))


async def test_changes_are_the_branchs_own_against_where_it_meets_the_base_now(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={"README.md": "# Shop\n", "tax.py": "RATE = 0\n"})
    tree = await create_worktree(await inspect_folder(str(repo)), "cart", "", tmp_path / "wt")
    folder = Path(tree.folder)
    (folder / "cart.py").write_text("ITEMS = []\n")
    commit(folder, "cart")
    (repo / "tax.py").write_text("RATE = 0.2\n")
    (repo / "README.md").write_text("# Shop\n## Shipping\nFree over 50.\n")
    commit(repo, "main moves on")
    run(folder, "merge", "--quiet", "main")  # the agent brings main in: not the branch's own work
    assert await change_stats(tree) == ChangeStats(1, 1, 0)
    # A merge that drops main's lines (say, -X ours on a conflict) shows them as removed.
    (folder / "README.md").write_text("# Shop\n")
    commit(folder, "lose the shipping note")
    stats = await change_stats(tree)
    assert stats == ChangeStats(2, 1, 2), stats
    assert "-Free over 50." in (await diff_text(tree)).text


async def test_counts_are_against_the_start_when_the_base_branch_is_gone_or_unrelated(tmp_path: Path) -> None:
    """The diff finds the merge base itself; when it cannot (the base branch deleted, or
    rewritten with no history in common), the counts are against the commit the worktree
    started from, as the whole diff is."""
    repo = make_repo(tmp_path / "repo", files={"a.py": "A = 1\n"})
    run(repo, "branch", "develop")
    tree = await create_worktree(await inspect_folder(str(repo)), "gone", "develop", tmp_path / "wt")
    assert tree.base == "develop" and tree.base_commit
    folder = Path(tree.folder)
    (folder / "a.py").write_text("A = 2\n")
    commit(folder, "a two")
    (folder / "b.py").write_text("B = 1\nC = 2\n")
    assert await change_stats(tree) == ChangeStats(2, 3, 1)
    run(repo, "branch", "-D", "develop")
    assert await change_stats(tree) == ChangeStats(2, 3, 1)
    assert "+A = 2" in (await diff_text(tree)).text
    run(repo, "checkout", "--quiet", "--orphan", "develop")  # the name back, no history in common
    run(repo, "commit", "--quiet", "-m", "unrelated")
    assert await change_stats(tree) == ChangeStats(2, 3, 1)


async def test_discard_refuses_for_a_branch_with_work_even_when_its_folder_is_gone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "precious", "", tmp_path / "wt")
    Path(tree.folder, "work.txt").write_text("work\n")
    sha = await commit_all(tree, "the only copy")
    subprocess.run(["rm", "-rf", tree.folder], check=True)
    assert await worktree_state(tree) == WorktreeState(uncommitted=0, ahead=1, unpushed=1)
    with pytest.raises(WorkspaceError, match="1 commit neither merged nor pushed; nothing was removed"):
        await discard(tree)
    assert run(repo, "rev-parse", "precious") == sha  # the branch and its commit are still there
    assert "removed" in await discard(tree, force=True)
    assert run(repo, "branch", "--list", "precious") == ""


async def test_a_repository_without_commits_counts_everything_as_new(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    run(tmp_path, "init", "--quiet", "-b", "main", str(empty))
    (empty / "a.txt").write_text("one\ntwo\n")
    here = in_place(await inspect_folder(str(empty)))
    assert await change_stats(here) == ChangeStats(1, 2, 0)
    commit(empty, "first")
    (empty / "HEAD").write_text("a file named like a revision\n")  # revisions are ended with --
    assert await change_stats(in_place(await inspect_folder(str(empty)))) == ChangeStats(1, 1, 0)


async def test_a_failed_worktree_creation_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", {"big.bin": "data\n", ".gitattributes": "*.bin filter=broken\n"})
    info = await inspect_folder(str(repo))
    root = tmp_path / "wt"
    # The user's own required filter fails on checkout (a git-lfs that cannot reach its server).
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text('[filter "broken"]\n\tsmudge = false\n\tclean = cat\n\trequired = true\n')
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(WorkspaceError, match="the worktree could not be made: .*smudge filter broken failed"):
        await create_worktree(info, "polypilot/lfs", "", root)
    assert run(repo, "branch", "--list", "polypilot/lfs") == ""
    assert run(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not root.exists()  # the folders made for it went too
    monkeypatch.undo()
    # A folder that cannot be made (the root is a file): the branch made first goes again.
    root.write_text("not a folder\n")
    with pytest.raises(WorkspaceError, match="the worktree could not be made"):
        await create_worktree(info, "polypilot/nowhere", "", root)
    assert run(repo, "branch", "--list", "polypilot/nowhere") == ""
    assert root.read_text() == "not a folder\n"
    # Refused up front: a name that is not its own, or too long for a folder.
    for branch in ("@", "@{-1}", "HEAD", "-b", "a" * 201):
        with pytest.raises(WorkspaceError, match="not a valid branch name|too long"):
            await create_worktree(info, branch, "", tmp_path / "wt2")
    assert run(repo, "branch", "--list", "--format=%(refname:short)") == "main"
    assert not (tmp_path / "wt2").exists()


async def test_unmake_removes_the_worktree_of_a_session_that_was_not_created(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "unused", "", tmp_path / "wt")
    assert "is removed again" in await unmake(tree)
    assert not Path(tree.folder).exists() and run(repo, "branch", "--list", "unused") == ""
    kept = await create_worktree(await inspect_folder(str(repo)), "kept", "", tmp_path / "wt")
    Path(kept.folder, "already.txt").write_text("work\n")
    assert "stays" in await unmake(kept) and Path(kept.folder, "already.txt").exists()


async def test_discard_names_untracked_and_ignored_files_and_keeps_them(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "*.env\nbuild/\n", "README.md": "hello\n"})
    tree = await create_worktree(await inspect_folder(str(repo)), "secrets", "", tmp_path / "wt")
    folder = Path(tree.folder)
    (folder / "secret.env").write_text("TOKEN=hunter2\n")
    with pytest.raises(WorkspaceError, match=r"^the worktree has 1 git-ignored file or folder \(secret.env\);"):
        await discard(tree)
    assert (folder / "secret.env").exists()
    for n in range(6):
        (folder / f"more{n}.env").write_text("x\n")
    (folder / "build").mkdir()
    (folder / "build" / "out.o").write_bytes(b"\0")
    (folder / "notes.md").write_text("new\n")
    state = await worktree_state(tree)
    assert state.untracked == ("notes.md",) and len(state.ignored) == 8 and "build/" in state.ignored
    said = state.at_risk()
    assert said.startswith("1 uncommitted file (new: notes.md) and 8 git-ignored files or folders (")
    assert said.endswith(" and 3 more)")  # five named, the rest counted
    with pytest.raises(WorkspaceError, match="nothing was removed"):
        await discard(tree)
    assert "removed" in await discard(tree, force=True)
    assert not folder.exists()


async def test_a_worktree_holding_thousands_of_files_is_described_in_bounded_words(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "*.log\n"})
    tree = await create_worktree(await inspect_folder(str(repo)), "many", "", tmp_path / "wt")
    folder = Path(tree.folder)
    for n in range(MAX_LISTED + 50):
        (folder / f"new{n:04}.txt").write_text("x\n")
        (folder / f"run{n:04}.log").write_text("x\n")
    state = await worktree_state(tree)
    assert state.uncommitted == MAX_LISTED + 50
    assert len(state.untracked) == MAX_LISTED and state.more_untracked == 50  # every name is not carried
    assert len(state.ignored) == MAX_LISTED and state.more_ignored == 50 and state.ignored_count == MAX_LISTED + 50
    said = state.at_risk()
    assert f"{MAX_LISTED + 50} uncommitted files (new: new0000.txt, " in said
    assert f"new0004.txt and {MAX_LISTED + 45} more)" in said
    assert f"{MAX_LISTED + 50} git-ignored files or folders (run0000.log, " in said


async def test_a_checked_out_submodule_is_work_at_risk(tmp_path: Path) -> None:
    sub = make_repo(tmp_path / "lib", {"lib.py": "x = 1\n"})
    repo = make_repo(tmp_path / "repo")
    run(repo, "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", str(sub), "lib")
    commit(repo, "the library")
    tree = await create_worktree(await inspect_folder(str(repo)), "with-lib", "", tmp_path / "wt")
    assert (await worktree_state(tree)).at_risk() == ""  # not checked out: nothing in it
    run(Path(tree.folder), "-c", "protocol.file.allow=always", "submodule", "--quiet", "update", "--init")
    Path(tree.folder, "lib", "lib.py").write_text("x = 2\n")  # its own change, not looked at
    with pytest.raises(WorkspaceError, match=r"1 checked-out submodule \(lib\); nothing was removed"):
        await discard(tree)
    assert Path(tree.folder, "lib", "lib.py").read_text() == "x = 2\n"


async def test_the_start_up_prune_keeps_worktrees_holding_ignored_or_untracked_files(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": ".env\n"})
    root = tmp_path / "wt"
    info = await inspect_folder(str(repo))
    secret = await create_worktree(info, "secret", "", root)
    new = await create_worktree(info, "new", "", root)
    clean = await create_worktree(info, "clean", "", root)
    Path(secret.folder, ".env").write_text("PASSWORD=x\n")
    Path(new.folder, "idea.txt").write_text("an idea\n")
    assert await prune_orphans(str(repo), root, lambda: set()) == [clean.folder]
    assert Path(secret.folder, ".env").read_text() == "PASSWORD=x\n"
    assert Path(new.folder, "idea.txt").exists()
    assert run(repo, "branch", "--list", "secret") != ""


async def test_counting_changes_runs_two_git_processes_and_the_listing_waits_for_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sidebar counts after every turn: the diff and the untracked listing start at once
    (the listing reads no file, so it needs no filter settings; a plain repository config needs
    no settings lookup); the diff finds where the branch meets its base itself (a
    ``merge-base`` process was one more, waited for). Where the repository's config could set
    a filter, the one lookup comes back, before the diff."""
    repo = make_repo(tmp_path / "repo", files={"a.py": "A = 1\n", "b.py": "B = 1\n"})
    tree = await create_worktree(await inspect_folder(str(repo)), "count", "", tmp_path / "wt")
    folder = Path(tree.folder)
    (folder / "a.py").write_text("A = 2\n")
    (folder / "new.py").write_text("N = 1\nM = 2\n")
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout.strip()
    shim, log = tmp_path / "bin", tmp_path / "calls.log"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n')
    (shim / "git").chmod(0o700)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")

    def calls() -> list[str]:
        found = [line.split()[1] for line in log.read_text().splitlines()]  # after --no-pager
        log.unlink()
        return found

    assert await change_stats(tree) == ChangeStats(2, 3, 1)
    assert sorted(calls()) == ["diff", "ls-files"]
    assert await untracked(tree) == ["new.py"]
    assert calls() == ["ls-files"]
    text = await diff_text(tree)
    assert text.untracked == ("new.py",)
    assert sorted(calls()) == ["diff", "diff", "ls-files", "merge-base"]  # one diff per new file
    run(repo, "config", "filter.lfs.required", "true")
    log.unlink()
    assert await change_stats(tree) == ChangeStats(2, 3, 1)
    looked = calls()
    assert sorted(looked) == ["config", "diff", "ls-files"] and looked.index("config") < looked.index("diff")


async def test_a_base_commit_planted_in_the_saved_file_never_reaches_git_as_an_option(tmp_path: Path) -> None:
    """The registry hands a worktree's start commit to ``git diff`` when its base branch is
    gone: one that is not a commit id (``--output=FILE`` written into sessions.json) is dropped
    as the file is read, and the counts go on from HEAD; nothing is written by git."""
    repo = make_repo(tmp_path / "repo", files={"a.py": "A = 1\n"})
    run(repo, "branch", "develop")
    tree = await create_worktree(await inspect_folder(str(repo)), "planted", "develop", tmp_path / "wt")
    (Path(tree.folder) / "b.py").write_text("B = 1\n")
    run(repo, "branch", "-D", "develop")
    planted = tmp_path / "written-by-git"
    store = Store(tmp_path / "state")
    try:
        record = SessionRecord(id="s1", name="one", agent="demo", cwd=tree.folder, created_at=0.0, status="idle")
        fields = workspace_fields(replace(tree, base_commit=f"--output={planted}"))
        store.registry.save([replace(record, **fields)], 0.0)
        (loaded,) = store.registry.load().sessions
    finally:
        store.close()
    assert loaded.base_commit == ""  # dropped as the file was read: not a commit id
    restored = workspace_of(loaded)
    assert restored is not None
    assert await change_stats(restored) == ChangeStats(1, 1, 0)
    assert not planted.exists()
    # And were one to get through, git reads it as a revision, never as an option.
    with pytest.raises(WorkspaceError):
        await change_stats(replace(restored, base_commit=f"--output={planted}"))
    assert not planted.exists()
