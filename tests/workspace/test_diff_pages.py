"""A session's diff read where the engine runs, a page at a time: a big diff comes whole in
bounded pages, every new file marked, one reading stays the same while the agent writes, and
a diff larger than the engine reads is cut and says so. Real git, the engine in this process
(tests/service/test_workspace_verbs.py asks the same over the socket)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.changeset import FileStatus
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine import verbs, workspaces
from polypilot_tui.engine.api import BadRequest, EngineError, ReadingGone
from polypilot_tui.engine.diff_pages import MAX_READINGS, read_changeset, read_diff
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.workspace.changes import diff_text
from polypilot_tui.workspace.worktrees import create_worktree, inspect_folder
from tests.workspace.repos import make_repo

LINE = "x" * 99 + "\n"


def engine(tmp_path: Path) -> LocalEngine:
    ids = itertools.count(1)
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    manager = SessionManager(settings, load_agents(None), SystemClock(), id_factory=lambda: f"s{next(ids)}")
    return LocalEngine(manager)


async def test_a_big_diff_comes_in_bounded_pages_and_reads_back_whole(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "big", "", tmp_path / "wt")
    folder = Path(tree.folder)
    (folder / "a-first.txt").write_text("new\n")  # untracked: its part comes early
    (folder / "README.md").write_text(LINE * 15_000)  # 1.5 MB of tracked change
    (folder / "z-late.txt").write_text(LINE * 9_000)  # untracked, its part past the first page
    (folder / "zz-last.txt").write_text("last\n")
    local = engine(tmp_path)
    try:
        sid = local.manager.add_session("demo", "big", workspace=tree, connect=False)
        first = await local.call(verbs.DIFF, verbs.DiffRange(sid))
        assert len(first.text) == verbs.DIFF_PAGE and first.total > 2 * verbs.DIFF_PAGE and first.reading
        assert first.base == "main" and not first.truncated
        (folder / "README.md").write_text("the agent goes on\n")  # pages of a reading keep its diff
        pages, start = [first], len(first.text)
        while start < first.total:
            page = await local.call(verbs.DIFF, verbs.DiffRange(sid, start, first.reading))
            assert len(page.text) <= verbs.DIFF_PAGE and page.total == first.total
            pages.append(page)
            start += len(page.text)
        assert len(pages) == 3
        assert [name for page in pages for name in page.untracked] == ["a-first.txt", "z-late.txt", "zz-last.txt"]
        assert "z-late.txt" not in first.untracked  # each name rides on the page its part begins on
        with pytest.raises(ReadingGone):  # read to the end: forgotten
            await local.call(verbs.DIFF, verbs.DiffRange(sid, 0, first.reading))

        (folder / "README.md").write_text(LINE * 15_000)
        whole = await read_diff(local, sid)
        assert whole.text == (await diff_text(tree)).text
        changes, cut = await read_changeset(local, sid)
        assert not cut
        assert {f.path: f.status for f in changes.files} == {
            "README.md": FileStatus.MODIFIED,
            "a-first.txt": FileStatus.UNTRACKED,
            "z-late.txt": FileStatus.UNTRACKED,
            "zz-last.txt": FileStatus.UNTRACKED,
        }
    finally:
        await local.close()


async def test_readings_are_bounded_and_a_forgotten_one_is_read_again(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "few", "", tmp_path / "wt")
    Path(tree.folder, "README.md").write_text(LINE * 12_000)
    local = engine(tmp_path)
    try:
        sid = local.manager.add_session("demo", "few", workspace=tree, connect=False)
        other = local.manager.add_session("demo", "other", workspace=tree, connect=False)
        started = [await local.call(verbs.DIFF, verbs.DiffRange(sid)) for _ in range(MAX_READINGS + 1)]
        with pytest.raises(ReadingGone):  # the oldest went for the newest
            await local.call(verbs.DIFF, verbs.DiffRange(sid, verbs.DIFF_PAGE, started[0].reading))
        with pytest.raises(ReadingGone):  # a reading is its session's only
            await local.call(verbs.DIFF, verbs.DiffRange(other, verbs.DIFF_PAGE, started[-1].reading))
        second = await local.call(verbs.DIFF, verbs.DiffRange(sid, verbs.DIFF_PAGE, started[-1].reading))
        assert second.start == verbs.DIFF_PAGE and second.text
        beyond = verbs.DiffRange(sid, 10**9, started[-2].reading)
        for bad in (verbs.DiffRange(sid, -1), verbs.DiffRange(sid, 5), beyond):
            with pytest.raises(BadRequest):
                await local.call(verbs.DIFF, bad)

        class Crowded:
            """Other readers start MAX_READINGS readings after this one's first page."""

            crowded = False

            async def call(self, verb: Any, request: Any) -> Any:
                reply = await local.call(verb, request)
                if verb is verbs.DIFF and not self.crowded:
                    self.crowded = True
                    for _ in range(MAX_READINGS):
                        await local.call(verbs.DIFF, verbs.DiffRange(sid))
                return reply

        assert (await read_diff(Crowded(), sid)).text == (await diff_text(tree)).text  # read again, whole
        plain = local.manager.add_session("demo", "plain", connect=False)
        with pytest.raises(EngineError, match="does not work in a git repository"):
            await local.call(verbs.DIFF, verbs.DiffRange(plain))
        with pytest.raises(EngineError, match="does not work in a git repository"):
            await local.call(verbs.DIFF_STAT, verbs.SessionRef(plain))
    finally:
        await local.close()


async def test_a_diff_larger_than_the_engine_reads_is_cut_and_says_so(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "huge", "", tmp_path / "wt")
    Path(tree.folder, "README.md").write_text(LINE * 50)
    Path(tree.folder, "more.txt").write_text(LINE * 50)
    whole = await diff_text(tree)
    tracked = whole.starts[0]
    cut = await diff_text(tree, limit=tracked + 100)  # the new file's part does not fit
    assert cut.truncated and cut.text == whole.text[:tracked] and cut.untracked == ()
    shorter = await diff_text(tree, limit=100)
    assert shorter.truncated and len(shorter.text) == 100


async def test_a_diff_stat_is_bounded_by_its_files_and_by_their_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = await create_worktree(await inspect_folder(str(repo)), "stat", "", tmp_path / "wt")
    for n in range(5):
        Path(tree.folder, f"name{n}.txt").write_text("x\n")
    local = engine(tmp_path)
    try:
        sid = local.manager.add_session("demo", "stat", workspace=tree, connect=False)
        whole = await local.call(verbs.DIFF_STAT, verbs.SessionRef(sid))
        assert [f.path for f in whole.files] == [f"name{n}.txt" for n in range(5)] and whole.more == 0
        monkeypatch.setattr(workspaces, "MAX_STAT_FILES", 3)
        few = await local.call(verbs.DIFF_STAT, verbs.SessionRef(sid))
        assert (len(few.files), few.more, few.total) == (3, 2, whole.total)  # the totals count every file
        monkeypatch.setattr(workspaces, "MAX_STAT_CHARS", 2 * len("name0.txt"))
        short = await local.call(verbs.DIFF_STAT, verbs.SessionRef(sid))
        assert (len(short.files), short.more, short.total.files) == (2, 3, 5)
    finally:
        await local.close()
