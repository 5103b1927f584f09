"""The app's git calls skip the settings lookup only where the repository's own config files,
read as git reads them, plainly set nothing it would undo (workspace/git.py, ``app_config``).

Every layout below defines a filter in a file git reads, in a way the files' words must give
away, or is one where git could read other files than the ones we would: the lookup runs,
and a real change count runs no program of the repository. Where the config is plain, no
lookup runs at all: with git out of ``PATH``, the settings are still found.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from polypilot_tui.domain.changeset import FileCount
from polypilot_tui.workspace.changes import file_counts
from polypilot_tui.workspace.git import GitMissing, app_config
from polypilot_tui.workspace.worktrees import in_place, inspect_folder
from tests.workspace.hostile import Marks
from tests.workspace.repos import make_repo, run


def filtered_repo(root: Path) -> Path:
    """A repository whose attributes send every file through filter ``x`` (defined nowhere yet)."""
    return make_repo(root / "repo", {"a.txt": "one\n", ".gitattributes": "* filter=x\n"})


def clean_program(marks: Marks) -> str:
    return marks.program("repo-clean", filter_=True)


def define_in_config(repo: Path, marks: Marks) -> Path:
    run(repo, "config", "filter.x.clean", clean_program(marks))
    return repo


def by_hand(text: str) -> Callable[[Path, Marks], Path]:
    """A layout: ``text`` (with ``{clean}`` for the program) added to ``.git/config`` by hand."""

    def write(repo: Path, marks: Marks) -> Path:
        with open(repo / ".git" / "config", "a") as config:
            config.write(text.format(clean=clean_program(marks)))
        return repo

    return write


def included(section: str) -> Callable[[Path, Marks], Path]:
    """A layout: the filter defined in a file the repository's config includes."""

    def write(repo: Path, marks: Marks) -> Path:
        (repo / ".git" / "more.config").write_text(f'[filter "x"]\n\tclean = {clean_program(marks)}\n')
        with open(repo / ".git" / "config", "a") as config:
            config.write(f"[{section}]\n\tpath = more.config\n")  # relative: no word of the test's own path
        return repo

    return write


def linked_worktree(repo: Path) -> Path:
    tree = repo.parent / "linked"
    run(repo, "worktree", "add", "--quiet", "-b", "linked", str(tree))
    return tree


def worktree_config(repo: Path, marks: Marks) -> Path:
    run(repo, "config", "extensions.worktreeConfig", "true")
    tree = linked_worktree(repo)
    run(tree, "config", "--worktree", "filter.x.clean", clean_program(marks))
    return tree


def common_config_of_a_linked_worktree(repo: Path, marks: Marks) -> Path:
    tree = linked_worktree(repo)
    define_in_config(repo, marks)
    return tree


def separate_git_dir(repo: Path, marks: Marks) -> Path:
    """``.git`` a file naming, by a relative path, a git dir elsewhere that defines the filter."""
    (repo / ".git").rename(repo.parent / "elsewhere.git")
    (repo / ".git").write_text("gitdir: ../elsewhere.git\n")
    run(repo, "config", "filter.x.clean", clean_program(marks))
    return repo


def linked_config(repo: Path, marks: Marks) -> Path:
    """``.git/config`` a link to a file that defines the filter (git follows it)."""
    config = repo / ".git" / "config"
    target = repo.parent / "linked.config"
    target.write_text(config.read_text() + f'[filter "x"]\n\tclean = {clean_program(marks)}\n')
    config.unlink()
    config.symlink_to(target)
    return repo


def not_a_repository_below_one(repo: Path, marks: Marks) -> Path:
    """A plain-looking ``.git`` folder that git does not take for a repository (no ``HEAD``):
    git goes on up, to the repository above it, which defines the filter."""
    define_in_config(repo, marks)
    below = repo / "sub"
    (below / ".git" / "objects").mkdir(parents=True)
    (below / ".git" / "refs").mkdir()
    (below / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (below / "b.txt").write_text("b\n")
    run(repo, "add", "sub/b.txt")
    run(repo, "commit", "--quiet", "-m", "sub")
    return below


def worktree_config_through_proc(repo: Path, marks: Marks) -> Path:
    """``config.worktree`` a link into ``/proc/self/cwd``: to git, run in the working tree, a
    file the agent wrote there; to the app, in its own folder, none (the reviewer's attack)."""
    run(repo, "config", "core.repositoryformatversion", "1")
    run(repo, "config", "extensions.worktreeConfig", "true")
    (repo / "wtcfg").write_text(f'[filter "x"]\n\tclean = {clean_program(marks)}\n')
    (repo / ".git" / "config.worktree").symlink_to("/proc/self/cwd/wtcfg")
    return repo


def commondir_through_proc(repo: Path, marks: Marks) -> Path:
    """``commondir`` a link into ``/proc/self/cwd``, naming a common dir whose config sets the
    filter (its objects and refs are the real ones)."""
    fake = repo / ".evil"
    fake.mkdir()
    (fake / "config").write_text(
        (repo / ".git" / "config").read_text() + f'[filter "x"]\n\tclean = {clean_program(marks)}\n'
    )
    for name in ("objects", "refs"):
        (fake / name).symlink_to(repo / ".git" / name)
    (repo / ".cdpath").write_text("../.evil\n")
    (repo / ".git" / "commondir").symlink_to("/proc/self/cwd/.cdpath")
    return repo


def gitdir_through_proc(repo: Path, marks: Marks) -> Path:
    """``.git`` a file naming a git dir by a path through ``/proc/self/cwd``."""
    (repo / ".git").rename(repo / ".real")
    (repo / ".git").write_text("gitdir: /proc/self/cwd/.real\n")
    run(repo, "config", "filter.x.clean", clean_program(marks))
    return repo


def gitdir_through_a_link_and_back(repo: Path, marks: Marks) -> Path:
    """``gitdir: hop/../.real`` where ``hop`` is a link: the kernel reads ``..`` from the link's
    target, not from ``hop``'s own folder."""
    (repo / ".git").rename(repo / ".real")
    (repo / "elsewhere" / "inner").mkdir(parents=True)
    (repo / "hop").symlink_to(repo / "elsewhere" / "inner")
    (repo / "elsewhere" / ".real").symlink_to(repo / ".real")
    (repo / ".git").write_text("gitdir: hop/../.real\n")
    run(repo, "config", "filter.x.clean", clean_program(marks))
    return repo


HOSTILE = {
    "config.worktree through /proc": worktree_config_through_proc,
    "commondir through /proc": commondir_through_proc,
    "gitdir through /proc": gitdir_through_proc,
    "gitdir through a link and back": gitdir_through_a_link_and_back,
    "config": define_in_config,
    "upper case": by_hand('[FILTER "x"]\n\tclean = {clean}\n'),
    "old section form": by_hand("[filter.x]\n\tclean = {clean}\n"),
    "include": included("include"),
    "includeIf": included('includeIf "gitdir:/"'),
    "config.worktree": worktree_config,
    "linked worktree": common_config_of_a_linked_worktree,
    "separate git dir": separate_git_dir,
    "config a link": linked_config,
    "no HEAD below a repository": not_a_repository_below_one,
}


@pytest.mark.parametrize("layout", HOSTILE.values(), ids=HOSTILE.keys())
async def test_a_program_set_anywhere_git_reads_is_looked_up_and_never_runs(
    tmp_path: Path, layout: Callable[[Path, Marks], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "filter" not in str(tmp_path).lower()  # the words looked for come from the layout alone
    marks = Marks(tmp_path)
    folder = layout(filtered_repo(tmp_path), marks)
    changed = next(p for p in (folder / "a.txt", folder / "b.txt") if p.exists())
    changed.write_text(changed.read_text() + "two\n")
    marks.clear()
    counts = await file_counts(in_place(await inspect_folder(str(folder))))
    top = Path(run(folder, "rev-parse", "--show-toplevel"))
    assert FileCount(changed.relative_to(top).as_posix(), 1, 0) in counts  # beside the layout's own new files
    assert marks.ran() == []
    run(folder, "diff", "--stat")  # armed: plain git runs the repository's filter there
    assert marks.ran() == ["repo-clean"]
    with monkeypatch.context() as patch:
        patch.setenv("PATH", str(tmp_path / "no-git"))
        with pytest.raises(GitMissing):  # the lookup was needed, not skipped
            await app_config(str(folder))


def fifo_config(repo: Path) -> Path:
    os.unlink(repo / ".git" / "config")
    os.mkfifo(repo / ".git" / "config")
    return repo


def huge_config(repo: Path) -> Path:
    with open(repo / ".git" / "config", "a") as config:
        config.write("# padding\n" * 120_000)
    return repo


def linked_head(repo: Path) -> Path:
    head = repo / ".git" / "HEAD"
    head.unlink()
    head.symlink_to("refs/heads/main")
    return repo


def set_in_config(key: str) -> Callable[[Path], Path]:
    """A layout: ``key`` set to a program in the repository's config (no filter in it)."""

    def write(repo: Path) -> Path:
        run(repo, "config", key, "/bin/true")
        return repo

    return write


UNSURE = {
    "config a FIFO": fifo_config,
    "config of 1.2 MB": huge_config,
    "HEAD a link": linked_head,
    # what the user's git-lfs would run (tests/workspace/test_hostile_repo.py)
    "an lfs extension": set_in_config("lfs.extension.evil.clean"),
    "an lfs transfer under another name": set_in_config("remote.lfs.customtransfer.evil.path"),
}


@pytest.mark.parametrize("layout", UNSURE.values(), ids=UNSURE.keys())
async def test_a_config_that_cannot_be_read_plainly_is_looked_up(
    tmp_path: Path, layout: Callable[[Path], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = layout(make_repo(tmp_path / "repo"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-git"))
    with pytest.raises(GitMissing):
        await app_config(str(folder))


def plain_separate_git_dir(repo: Path) -> Path:
    (repo / ".git").rename(repo.parent / "elsewhere.git")
    (repo / ".git").write_text(f"gitdir: {repo.parent / 'elsewhere.git'}\r\n")
    return repo


PLAIN = {
    "checkout": lambda repo: repo,
    "linked worktree": linked_worktree,
    "separate git dir": plain_separate_git_dir,
}


@pytest.mark.parametrize("layout", PLAIN.values(), ids=PLAIN.keys())
async def test_a_plain_config_needs_no_lookup(
    tmp_path: Path, layout: Callable[[Path], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = layout(make_repo(tmp_path / "repo"))
    with_git = await app_config(str(folder))
    monkeypatch.setenv("PATH", str(tmp_path / "no-git"))
    assert await app_config(str(folder)) == with_git
    assert not any(key.startswith("filter.") for key, _ in with_git.config)
