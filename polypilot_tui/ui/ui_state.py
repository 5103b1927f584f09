"""Where the user was: the session on screen, unsent drafts, how far each chat was scrolled.

Saved to ``<state dir>/ui-state.json`` (private, replaced atomically, secrets redacted) a
second after it changes and when the dashboard quits, and read at the next start. Each
unsent draft is kept whole in a file of its own, ``<state dir>/drafts/<digest>.json``: a
long paste left unsent comes back as it was, never cut (the prompt box holds at most
limits.DRAFT_CHARS, and a paste past that is refused where it is made). The files are
untrusted like every input: bounded in size, every field checked; a file that cannot be
used is left where it is, with a note.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import field
from pathlib import Path
from typing import Any

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.limits import DRAFT_FILE_BYTES
from polypilot_tui.domain.safe_json import ParseError, dump_json, load_json
from polypilot_tui.infra.private import atomic_write, move_aside, private_dir, read_private
from polypilot_tui.infra.redact import REDACTOR

log = logging.getLogger(__name__)

UI_STATE_FILE = "ui-state.json"
DRAFTS_DIR = "drafts"
MAX_FILE_BYTES = 4_000_000
"""ui-state.json (drafts of older versions were in it, at most 200,000 characters each)."""
MAX_RECENT_FOLDERS = 10
MAX_PATH_CHARS = 4096


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
        """ui-state.json (the drafts are files of their own)."""
        return {
            "version": 2,
            "selected": self.selected,
            "scroll_back": {k: v for k, v in self.scroll_back.items() if v > 0},
            "recent_folders": self.recent_folders[:MAX_RECENT_FOLDERS],
        }


def remember_folder(recent: list[str], folder: str) -> list[str]:
    """``folder`` first, then the others, at most :data:`MAX_RECENT_FOLDERS`."""
    return [folder, *(f for f in recent if f != folder)][:MAX_RECENT_FOLDERS]


def draft_path(state_dir: Path, session_id: str) -> Path:
    """Where a session's unsent draft is kept (named by a digest: an id may hold any character)."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return Path(state_dir) / DRAFTS_DIR / f"{digest}.json"


def load_ui_state(state_dir: Path) -> tuple[UiState, str]:
    """The saved state and a problem sentence ("" when fine or absent)."""
    path = Path(state_dir) / UI_STATE_FILE
    state, problem = UiState(), ""
    try:
        raw = load_json(read_private(path, MAX_FILE_BYTES), str(path))
        state = _state(raw) if isinstance(raw, dict) else state
        problem = "" if isinstance(raw, dict) else f"{path} is not a JSON object; ignored"
    except FileNotFoundError:
        pass
    except (OSError, ParseError) as exc:
        problem = f"{path} could not be read ({exc}); the last selection and scroll are not restored"
    drafts, lost = _load_drafts(Path(state_dir))
    state.drafts.update(drafts)  # over an older version's (cut) ones
    return state, "; ".join(p for p in (problem, *lost) if p)


def _state(raw: dict[str, Any]) -> UiState:
    selected = raw.get("selected")
    drafts = raw.get("drafts")  # an older version's, in this file
    scroll = raw.get("scroll_back")
    recent = raw.get("recent_folders")
    return UiState(
        selected=selected if isinstance(selected, str) else None,
        drafts={k: v for k, v in drafts.items() if isinstance(k, str) and isinstance(v, str)}
        if isinstance(drafts, dict)
        else {},
        scroll_back={k: v for k, v in scroll.items() if isinstance(k, str) and type(v) is int and 0 < v < 10**9}
        if isinstance(scroll, dict)
        else {},
        recent_folders=[f for f in recent if isinstance(f, str) and 0 < len(f) <= MAX_PATH_CHARS][:MAX_RECENT_FOLDERS]
        if isinstance(recent, list)
        else [],
    )


def _load_drafts(state_dir: Path) -> tuple[dict[str, str], list[str]]:
    """Every saved draft, whole; and a sentence for each file that cannot be read (left as it is)."""
    drafts: dict[str, str] = {}
    lost: list[str] = []
    try:
        files = sorted((state_dir / DRAFTS_DIR).glob("*.json"))
    except OSError:
        return drafts, lost
    for file in files:
        try:
            raw = load_json(read_private(file, DRAFT_FILE_BYTES), str(file))  # never through a link
            if not (isinstance(raw, dict) and isinstance(raw.get("session"), str) and isinstance(raw.get("text"), str)):
                raise ValueError("not a draft")
        except (OSError, ValueError) as exc:
            moved = move_aside(file, str(exc))  # kept: the next save must not remove it
            lost.append(f"an unsent draft could not be read back ({exc}); it is kept in {moved or file}")
            continue
        if file == draft_path(state_dir, raw["session"]):
            drafts[raw["session"]] = raw["text"]
    return drafts, lost


def save_ui_state(state_dir: Path, state: UiState, saved: UiState | None = None) -> str:
    """Write the state, and each draft that changed since ``saved`` (whole, in its own file;
    a draft no longer there is removed); returns "" or a sentence saying what could not be saved."""
    path = Path(state_dir) / UI_STATE_FILE
    try:
        private_dir(path.parent)
        atomic_write(path, dump_json(REDACTOR.scrub(state.to_json())).encode("utf-8"))
        _save_drafts(Path(state_dir), state.drafts, saved.drafts if saved is not None else {})
    except (OSError, ValueError) as exc:
        log.error("saving %s failed: %s", path, exc)
        return f"your unsent drafts could not be saved to {path.parent}: {exc}"
    return ""


def _save_drafts(state_dir: Path, drafts: dict[str, str], saved: dict[str, str]) -> None:
    folder = state_dir / DRAFTS_DIR
    kept = {draft_path(state_dir, sid): (sid, text) for sid, text in drafts.items() if text}
    if kept:
        private_dir(folder)
    for file, (sid, text) in kept.items():
        if saved.get(sid) != text or not file.exists():
            atomic_write(file, dump_json(REDACTOR.scrub({"session": sid, "text": text})).encode("utf-8"))
    if folder.is_dir():
        for file in folder.glob("*.json"):
            if file not in kept:
                file.unlink(missing_ok=True)
