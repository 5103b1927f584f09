"""Completes a folder path as it is typed: recent folders first, then the folders there.

The folders are listed where the sessions run (the engine's ``LIST_FOLDERS``, bounded there),
through the callable the dialog is given, and never on the key path: Textual asks for a
suggestion in a worker.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence

from textual.suggester import Suggester

ListFolders = Callable[[str, str], Awaitable[Sequence[str]]]
"""The sub-folders of a folder (as typed) whose names begin with a prefix; () when none or
when the folder cannot be listed."""


def completion(value: str, names: Sequence[str]) -> str | None:
    """``value`` completed to the first of ``names`` (sub-folders of its folder that begin with
    its last part), with a trailing ``/``; None when there is none."""
    partial = os.path.basename(value)
    matching = [name for name in names if name.startswith(partial)]
    if not matching:
        return None
    # The exact name first (typing "src" offers "src/" before "src-old/").
    name = partial if partial in matching else min(matching)
    return value + name[len(partial) :] + os.sep


class FolderSuggester(Suggester):
    """Input suggestions for a folder: a recent folder the text starts, else a sub-folder."""

    def __init__(self, recent: Sequence[str] = (), list_folders: ListFolders | None = None) -> None:
        # No cache: folders come and go while the dialog is open.
        super().__init__(use_cache=False, case_sensitive=True)
        self._recent = list(recent)
        self._list_folders = list_folders

    async def get_suggestion(self, value: str) -> str | None:
        for folder in self._recent:
            if folder.startswith(value) and folder != value:
                return folder
        if not value or self._list_folders is None:
            return None
        parent, partial = os.path.split(value)
        return completion(value, await self._list_folders(parent or ".", partial))
