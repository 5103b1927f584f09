"""Folder completion (bounded, folders only) and the recent folders kept in ui-state.json."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from polypilot_tui.ui.folder_suggester import FolderSuggester, complete_folder
from polypilot_tui.ui.ui_state import UiState, load_ui_state, remember_folder, save_ui_state


def test_completes_sub_folders_only_and_skips_hidden_ones_unless_asked(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src-old").mkdir()
    (tmp_path / "setup.py").write_text("")
    (tmp_path / ".secret").mkdir()
    assert complete_folder(f"{tmp_path}/s") == f"{tmp_path}/src/"
    assert complete_folder(f"{tmp_path}/src") == f"{tmp_path}/src/"  # the exact name before src-old
    assert complete_folder(f"{tmp_path}/se") is None  # setup.py is a file
    assert complete_folder(f"{tmp_path}/") == f"{tmp_path}/src/"
    assert complete_folder(f"{tmp_path}/.s") == f"{tmp_path}/.secret/"
    assert complete_folder(f"{tmp_path}/nowhere/x") is None


def test_a_huge_folder_is_looked_at_only_up_to_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = 0

    class Entry:
        def __init__(self, n: int) -> None:
            self.name = f"file{n}"

        def is_dir(self) -> bool:
            return False

    class Endless:
        """A folder that never ends: completion must stop on its own."""

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
    assert complete_folder("/huge/file", limit=200) is None
    assert seen == 200


async def test_recent_folders_are_suggested_first(tmp_path: Path) -> None:
    (tmp_path / "alpha").mkdir()
    suggester = FolderSuggester([f"{tmp_path}/apple/pie"])
    assert await suggester.get_suggestion(f"{tmp_path}/a") == f"{tmp_path}/apple/pie"
    assert await suggester.get_suggestion(f"{tmp_path}/al") == f"{tmp_path}/alpha/"


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
