"""Folder completion (listed by the engine, bounded, folders only, absolute paths only) and
the recent folders kept in ui-state.json."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest

from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import BadRequest, EngineError
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.workspaces import MAX_SCANNED
from polypilot_tui.ui.folder_suggester import FolderSuggester
from polypilot_tui.ui.ui_state import UiState, load_ui_state, remember_folder, save_ui_state


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[LocalEngine]:
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    local = LocalEngine(SessionManager(settings, AgentCatalog({}), FakeClock()))
    yield local
    await local.close()


def suggester(engine: LocalEngine, recent: Sequence[str] = ()) -> FolderSuggester:
    """The dialog's suggester, its folders listed by ``engine`` (as the app gives it them)."""

    async def list_folders(folder: str, prefix: str) -> Sequence[str]:
        try:
            return (await engine.call(verbs.LIST_FOLDERS, verbs.FolderQuery(folder, prefix))).names
        except EngineError:
            return ()

    return FolderSuggester(recent, list_folders)


async def test_completes_sub_folders_only_and_skips_hidden_ones_unless_asked(
    tmp_path: Path, engine: LocalEngine
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src-old").mkdir()
    (tmp_path / "setup.py").write_text("")
    (tmp_path / ".secret").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "src")
    complete = suggester(engine).get_suggestion
    assert await complete(f"{tmp_path}/s") == f"{tmp_path}/src/"
    assert await complete(f"{tmp_path}/src") == f"{tmp_path}/src/"  # the exact name before src-old
    assert await complete(f"{tmp_path}/se") is None  # setup.py is a file
    assert await complete(f"{tmp_path}/l") == f"{tmp_path}/link/"  # a link to a folder is one
    assert await complete(f"{tmp_path}/.s") == f"{tmp_path}/.secret/"
    assert await complete(f"{tmp_path}/nowhere/x") is None
    listed = await engine.call(verbs.LIST_FOLDERS, verbs.FolderQuery(str(tmp_path)))
    assert listed == verbs.FolderListing(str(tmp_path.resolve()), ("link", "src", "src-old"))


async def test_only_absolute_folders_or_the_engines_home_are_listed(
    tmp_path: Path, engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative folder would be read against the engine's working folder, not the front end's."""
    home = tmp_path / "home"
    (home / "projects").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    listed = await engine.call(verbs.LIST_FOLDERS, verbs.FolderQuery("~"))
    assert (listed.folder, listed.names) == (str(home.resolve()), ("projects",))
    info = await engine.call(verbs.INSPECT_FOLDER, verbs.FolderRef("~/projects"))
    assert info.folder == str((home / "projects").resolve()) and not info.is_git
    for path in ("projects", "./x", "~root", "", "/x\0y", "/" + "x" * 5000):
        with pytest.raises(BadRequest):
            await engine.call(verbs.LIST_FOLDERS, verbs.FolderQuery(path))
        with pytest.raises(BadRequest):
            await engine.call(verbs.INSPECT_FOLDER, verbs.FolderRef(path))
    with pytest.raises(BadRequest):  # a prefix is the start of one name, not a path
        await engine.call(verbs.LIST_FOLDERS, verbs.FolderQuery(str(home), "../"))
    (home / "file").write_text("")
    for missing, said in ((home / "nowhere", "does not exist"), (home / "file", "is not a folder")):
        with pytest.raises(EngineError, match=said):
            await engine.call(verbs.LIST_FOLDERS, verbs.FolderQuery(str(missing)))
        with pytest.raises(EngineError, match=said):
            await engine.call(verbs.INSPECT_FOLDER, verbs.FolderRef(str(missing)))


async def test_a_huge_folder_is_looked_at_only_up_to_the_limit(
    engine: LocalEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = 0

    class Entry:
        def __init__(self, n: int) -> None:
            self.name = f"dir{n}" if n % 2 else f"file{n}"

        def is_dir(self) -> bool:
            return self.name.startswith("dir")

    class Endless:
        """A folder that never ends: the listing must stop on its own."""

        def __enter__(self) -> Iterator[Entry]:
            def entries() -> Iterator[Entry]:
                nonlocal seen
                for n in itertools.count():
                    seen += 1
                    yield Entry(n)

            return entries()

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(os, "scandir", lambda path: Endless())
    files = await engine.call(verbs.LIST_FOLDERS, verbs.FolderQuery("/huge", "file"))
    assert files.names == () and files.more and seen == MAX_SCANNED + 1
    seen = 0
    folders = await engine.call(verbs.LIST_FOLDERS, verbs.FolderQuery("/huge"))
    assert len(folders.names) == verbs.MAX_FOLDERS and folders.more and seen <= 2 * verbs.MAX_FOLDERS + 1


async def test_recent_folders_are_suggested_first(tmp_path: Path, engine: LocalEngine) -> None:
    (tmp_path / "alpha").mkdir()
    complete = suggester(engine, [f"{tmp_path}/apple/pie"]).get_suggestion
    assert await complete(f"{tmp_path}/a") == f"{tmp_path}/apple/pie"
    assert await complete(f"{tmp_path}/al") == f"{tmp_path}/alpha/"


def test_recent_folders_most_recent_first_at_most_ten_and_saved(tmp_path: Path) -> None:
    recent: list[str] = []
    for n in range(12):
        recent = remember_folder(recent, f"/p/{n}")
    recent = remember_folder(recent, "/p/5")
    assert recent == ["/p/5", "/p/11", "/p/10", "/p/9", "/p/8", "/p/7", "/p/6", "/p/4", "/p/3", "/p/2"]
    assert save_ui_state(tmp_path, UiState(recent_folders=recent)) == ""
    assert load_ui_state(tmp_path)[0].recent_folders == recent


def test_bad_recent_folders_in_the_file_are_dropped(tmp_path: Path) -> None:
    (tmp_path / "ui-state.json").write_text(json.dumps({"recent_folders": ["/ok", 3, "", "x" * 5000, None]}))
    assert load_ui_state(tmp_path)[0].recent_folders == ["/ok"]
