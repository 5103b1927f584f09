"""Where the user was: the session on screen, unsent drafts, how far each chat was scrolled.

Saved to ``<state dir>/ui-state.json`` (private, replaced atomically, secrets redacted) a
second after it changes and when the dashboard quits, and read at the next start. The file
is untrusted like every input: bounded in size, every field checked, and a file that cannot
be used is ignored with a note.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polypilot_tui.domain.safe_json import ParseError, dump_json, load_json
from polypilot_tui.infra.private import atomic_write, private_dir, read_private
from polypilot_tui.infra.redact import REDACTOR

log = logging.getLogger(__name__)

UI_STATE_FILE = "ui-state.json"
MAX_FILE_BYTES = 4_000_000
MAX_RECENT_FOLDERS = 10
MAX_PATH_CHARS = 4096
MAX_DRAFT_CHARS = 200_000
"""A longer draft is kept cut (a paste that big belongs in a file)."""


@dataclass
class UiState:
    """What the dashboard restores at start."""

    selected: str | None = None
    drafts: dict[str, str] = field(default_factory=dict)
    """Unsent prompt text per session."""
    scroll_back: dict[str, int] = field(default_factory=dict)
    """Lines above the end each chat was scrolled back to (absent: following the end)."""
    recent_folders: list[str] = field(default_factory=list)
    """Folders sessions were made in, most recent first (offered by the new-session dialog)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "selected": self.selected,
            "drafts": {k: v[:MAX_DRAFT_CHARS] for k, v in self.drafts.items() if v},
            "scroll_back": {k: v for k, v in self.scroll_back.items() if v > 0},
            "recent_folders": self.recent_folders[:MAX_RECENT_FOLDERS],
        }


def remember_folder(recent: list[str], folder: str) -> list[str]:
    """``folder`` first, then the others, at most :data:`MAX_RECENT_FOLDERS`."""
    return [folder, *(f for f in recent if f != folder)][:MAX_RECENT_FOLDERS]


def load_ui_state(state_dir: Path) -> tuple[UiState, str]:
    """The saved state and a problem sentence ("" when fine or absent)."""
    path = Path(state_dir) / UI_STATE_FILE
    try:
        raw = load_json(read_private(path, MAX_FILE_BYTES), str(path))
    except FileNotFoundError:
        return UiState(), ""
    except (OSError, ParseError) as exc:
        return UiState(), f"{path} could not be read ({exc}); the last drafts are not restored"
    if not isinstance(raw, dict):
        return UiState(), f"{path} is not a JSON object; ignored"
    selected = raw.get("selected")
    drafts = raw.get("drafts")
    scroll = raw.get("scroll_back")
    recent = raw.get("recent_folders")
    return UiState(
        selected=selected if isinstance(selected, str) else None,
        drafts={k: v[:MAX_DRAFT_CHARS] for k, v in drafts.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(drafts, dict)
        else {},
        scroll_back={k: v for k, v in scroll.items() if isinstance(k, str) and type(v) is int and 0 < v < 10**9}
        if isinstance(scroll, dict)
        else {},
        recent_folders=[f for f in recent if isinstance(f, str) and 0 < len(f) <= MAX_PATH_CHARS][:MAX_RECENT_FOLDERS]
        if isinstance(recent, list)
        else [],
    ), ""


def save_ui_state(state_dir: Path, state: UiState) -> str:
    """Write the state; returns "" or a sentence saying why it could not be saved."""
    path = Path(state_dir) / UI_STATE_FILE
    try:
        private_dir(path.parent)
        atomic_write(path, dump_json(REDACTOR.scrub(state.to_json())).encode("utf-8"))
    except (OSError, ValueError) as exc:
        log.error("saving %s failed: %s", path, exc)
        return f"your unsent drafts could not be saved to {path}: {exc}"
    return ""
