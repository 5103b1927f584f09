"""What could not be saved when the app quit: kept in a private file, written back at the
next start.

While the app runs, rows the history database cannot take (disk full, read-only folder,
locked) wait in memory and are retried. At quit they would be lost, so they are *spilled*:
one JSON file (0600) holding the unsaved rows, drafts and the last session list, in the
state folder when it can still be written there, else in a private folder of the user's
runtime directory (``$XDG_RUNTIME_DIR/polypilot-unsaved``, or ``<tmp>/polypilot-unsaved-<uid>``).
The next start on the same state folder writes it back and deletes it. Text in it has been
through the redactor like everything else the app writes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from dataclasses import asdict, field
from pathlib import Path
from typing import Any, TypeVar

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.limits import SPILL_BYTES
from polypilot_tui.domain.safe_json import ParseError, dump_json, load_json
from polypilot_tui.infra.private import atomic_write, private_dir, read_private
from polypilot_tui.infra.redact import REDACTOR

log = logging.getLogger(__name__)

SPILL_PREFIX = "unsaved-"
MAX_SPILL_BYTES = SPILL_BYTES
"""One spill file; a quit with more unsaved writes several (each row fits in one)."""
_KINDS = {k.value: k for k in ItemKind}
T = TypeVar("T", list[Any], dict[str, Any])


@dataclass
class Spill:
    """Everything one run could not save."""

    state_dir: str
    saved_at: float
    sessions: list[dict[str, Any]] | None = None
    """The last session list (registry records as JSON), when the registry could not be saved."""
    rows: list[tuple[str, int, ChatItem]] = field(default_factory=list)
    """Rows whose database index is known: (session id, index, item)."""
    appended: dict[str, list[ChatItem]] = field(default_factory=dict)
    """Rows whose index was never known (the history was unreadable): appended after the saved ones."""
    drafts: dict[str, tuple[str, float] | None] = field(default_factory=dict)
    deletions: list[str] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.sessions is not None or self.rows or self.appended or self.drafts or self.deletions)

    def row_count(self) -> int:
        return len(self.rows) + sum(len(v) for v in self.appended.values())


def _item_json(item: ChatItem) -> dict[str, Any]:
    data = asdict(item)
    data["kind"] = item.kind.value
    return data


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _item(data: Any) -> ChatItem | None:
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        return None
    return ChatItem(
        _KINDS.get(str(data.get("kind")), ItemKind.SYSTEM),
        data["text"],
        _seconds(data.get("at")),
        data.get("tool_call_id") if isinstance(data.get("tool_call_id"), str) else None,
        str(data.get("tool_name") or ""),
        str(data.get("tool_status") or ""),
        str(data.get("tool_detail") or ""),
        bool(data.get("interrupted")),
    )


def runtime_dir() -> Path:
    """The user's private runtime folder for spills (created 0700; never a shared one)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = (
        Path(base) / "polypilot-unsaved" if base else Path(tempfile.gettempdir()) / f"polypilot-unsaved-{os.getuid()}"
    )
    return private_dir(path)  # another user's folder there is refused (NotPrivate)


def _name(state_dir: Path) -> str:
    digest = hashlib.sha256(str(Path(state_dir).absolute()).encode()).hexdigest()[:16]
    return f"{SPILL_PREFIX}{digest}"


def write_spill(spill: Spill) -> list[Path]:
    """Write ``spill`` where it fits (the state folder first), in as many files as it takes for
    each to stay within :data:`MAX_SPILL_BYTES` (read back in order); raises OSError when
    nowhere does."""
    stamp = f"{_name(Path(spill.state_dir))}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    written: list[Path] = []
    for number, data in enumerate(_documents(spill)):
        written.append(_write(Path(spill.state_dir), f"{stamp}-{number:04d}.json", data))
    return written


def _documents(spill: Spill) -> list[bytes]:
    """The spill as JSON documents, each within :data:`MAX_SPILL_BYTES`: the session list in
    the first, the rows, drafts and deletions in order, a new document when the next would
    not fit."""
    head = REDACTOR.scrub({"state_dir": spill.state_dir, "saved_at": spill.saved_at})
    sessions = REDACTOR.scrub(spill.sessions)  # every text in it, rows and sessions alike
    entries: list[tuple[str, Any]] = [("deletions", d) for d in spill.deletions]
    entries += [("rows", [sid, idx, _item_json(item)]) for sid, idx, item in spill.rows]
    entries += [("appended", (sid, _item_json(item))) for sid, items in spill.appended.items() for item in items]
    entries += [
        ("drafts", (sid, None if d is None else [REDACTOR.fragment(d[0]), d[1]])) for sid, d in spill.drafts.items()
    ]
    documents: list[bytes] = []
    part: dict[str, Any] = {"sessions": sessions}
    size = len(dump_json({**head, "sessions": sessions}).encode("utf-8"))
    for kind, raw in entries:
        value = REDACTOR.scrub(raw)
        cost = len(dump_json(value).encode("utf-8")) + 2
        if size + cost > MAX_SPILL_BYTES and size > 256:
            documents.append(dump_json({**head, **part}).encode("utf-8"))
            part, size = {"sessions": None}, 256
        if kind in ("rows", "deletions"):
            part.setdefault(kind, []).append(value)
        else:
            sid, item = value
            bucket = part.setdefault(kind, {})
            if kind == "appended":
                bucket.setdefault(sid, []).append(item)
            else:
                bucket[sid] = item
        size += cost + 64  # a session id as a key
    documents.append(dump_json({**head, **part}).encode("utf-8"))
    return documents


def _write(state_dir: Path, file_name: str, data: bytes) -> Path:
    errors = []
    for folder in (state_dir, None):
        try:
            target = (folder if folder is not None else runtime_dir()) / file_name
            atomic_write(target, data)
            return target
        except OSError as exc:
            errors.append(f"{exc.strerror or exc}")
    raise OSError("; ".join(errors))


def find_spills(state_dir: Path) -> list[Path]:
    """Spill files of ``state_dir``, oldest first (in the folder and in the runtime folder)."""
    prefix = _name(state_dir)
    found: list[Path] = []
    folders = [Path(state_dir)]
    try:
        folders.append(runtime_dir())
    except OSError:
        pass
    for folder in folders:
        try:
            found += [p for p in folder.iterdir() if p.name.startswith(prefix) and p.suffix == ".json"]
        except OSError:
            continue
    return sorted(found, key=lambda p: p.name)


def read_spill(path: Path) -> Spill:
    """Parse a spill file; raises ParseError or OSError."""
    doc = load_json(read_private(path, MAX_SPILL_BYTES), str(path))
    if not isinstance(doc, dict):
        raise ParseError(str(path), None, "expected an object")
    spill = Spill(str(doc.get("state_dir") or ""), _seconds(doc.get("saved_at")))
    if isinstance(doc.get("sessions"), list):
        spill.sessions = [s for s in doc["sessions"] if isinstance(s, dict)]
    for entry in _field(doc, "rows", list):
        if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and isinstance(entry[1], int):
            item = _item(entry[2])
            if item is not None:
                spill.rows.append((entry[0], entry[1], item))
    for sid, items in _field(doc, "appended", dict).items():
        spill.appended[sid] = [i for i in map(_item, items if isinstance(items, list) else []) if i is not None]
    for sid, draft in _field(doc, "drafts", dict).items():
        if draft is None:
            spill.drafts[sid] = None
        elif isinstance(draft, list) and len(draft) == 2 and isinstance(draft[0], str):
            spill.drafts[sid] = (draft[0], _seconds(draft[1]))
    spill.deletions = [d for d in _field(doc, "deletions", list) if isinstance(d, str)]
    return spill


def _field(doc: dict[str, Any], key: str, kind: type[T]) -> T:
    """``doc[key]`` when it is a ``kind``; an empty one when missing or of another type."""
    value = doc.get(key)
    return value if isinstance(value, kind) else kind()
