"""Completes a folder path as it is typed: recent folders first, then the file system.

A folder with a million entries must not freeze the dialog, so a listing stops after
:data:`MAX_ENTRIES` and runs in a thread.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Sequence

from textual.suggester import Suggester

MAX_ENTRIES = 200
"""Entries of one folder looked at per completion."""


def complete_folder(value: str, limit: int = MAX_ENTRIES) -> str | None:
    """``value`` completed to the first sub-folder it starts, with a trailing ``/``, or None."""
    if not value:
        return None
    parent, partial = os.path.split(value)
    listing = os.path.expanduser(parent) if parent else "."
    names: list[str] = []
    try:
        with os.scandir(listing) as entries:
            for entry in itertools.islice(entries, limit):
                hidden_ok = partial.startswith(".") or not entry.name.startswith(".")
                if entry.name.startswith(partial) and hidden_ok and entry.is_dir():
                    names.append(entry.name)
    except OSError:
        return None
    if not names:
        return None
    # The exact name first (typing "src" offers "src/" before "src-old/").
    name = partial if partial in names else min(names)
    return value + name[len(partial) :] + os.sep


class FolderSuggester(Suggester):
    """Input suggestions for a folder: a recent folder the text starts, else a sub-folder."""

    def __init__(self, recent: Sequence[str] = (), limit: int = MAX_ENTRIES) -> None:
        # No cache: folders come and go while the dialog is open.
        super().__init__(use_cache=False, case_sensitive=True)
        self._recent = list(recent)
        self._limit = limit

    async def get_suggestion(self, value: str) -> str | None:
        for folder in self._recent:
            if folder.startswith(value) and folder != value:
                return folder
        return await asyncio.to_thread(complete_folder, value, self._limit)
