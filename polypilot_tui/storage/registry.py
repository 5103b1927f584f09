"""The session registry, ``state_dir/sessions.json``: which sessions exist and whether a
turn was in flight.

It is replaced atomically (temp file, fsync, rename), so a crash leaves the old file or
the new one, never half of either. It is read through the bounded JSON reader: a file that
cannot be parsed is moved aside (and the caller tells the user where it went); a field
that does not fit (a NaN time, a number as a name) is dropped, never the session.

One writer: a registry that finds the file replaced by someone else since its own last
write refuses to overwrite it (:class:`RegistryFenced`); with the state-folder lock that
only happens when the lock was broken, and then neither app silently undoes the other.
Every record goes through the redactor whole on the way out (every text field, the queue
and any field added later).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from polypilot_tui.domain.safe_json import ParseError, dump_json, load_json
from polypilot_tui.domain.usage import Usage, usage_from_plain
from polypilot_tui.infra.private import atomic_write, move_aside, read_private
from polypilot_tui.infra.redact import REDACTOR

log = logging.getLogger(__name__)

REGISTRY_FILE = "sessions.json"
REGISTRY_VERSION = 1
MAX_REGISTRY_BYTES = 64_000_000
"""A registry bigger than this is not ours (200 sessions take ~100 KB)."""


class RegistryFenced(OSError):
    """Another process replaced ``sessions.json`` since this one last wrote it."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class SessionRecord:
    """One session in ``sessions.json``. Times are epoch seconds."""

    id: str
    name: str
    agent: str
    cwd: str = ""
    model: str = ""
    agent_session_id: str = ""
    """The agent's own id, adopted after every connect (#382): what a resume needs."""
    title: str = ""
    created_at: float = 0.0
    status: str = "idle"
    reason: str = ""
    last_activity_at: float | None = None
    turn_in_flight: bool = False
    last_prompt: str = ""
    """Only while a turn is in flight (PolyPilot's ``LastPrompt``): resent or resumed on restore."""
    interrupted_prompt: str = ""
    """A turn lost to a restart and not yet resent: still offered after the next restart."""
    turns: int = 0
    """How many turns the session has finished, all runs of the app together."""
    queue: tuple[str, ...] = ()
    """Prompts queued behind the running turn: kept, and held for the user, across a restart."""
    isolation: str = ""
    """The workspace (domain/workspace.py): "" for none, else "folder" or "worktree"."""
    repo: str = ""
    branch: str = ""
    base: str = ""
    base_commit: str = ""
    usage: Usage = Usage()
    """What the agent reported it used (tokens, context, cost), all runs of the app together."""
    model_choice: str = ""
    """The model the user switched the session to: a restart does not revert it."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Any) -> SessionRecord | None:
        """Tolerant parse: unknown keys are ignored, a wrong type drops the field (None when unusable)."""
        if not isinstance(obj, Mapping):
            return None
        values: dict[str, Any] = {}
        for name, value in obj.items():  # one table look per key: 200 records are read at every start
            parse = _FIELD_PARSERS.get(name)
            if parse is not None and (parsed := parse(value)) is not _DROP:
                values[name] = parsed
        if not all(isinstance(values.get(k), str) and values[k] for k in ("id", "name", "agent")):
            return None
        return cls(**values)


_DROP = object()
"""A field value that does not fit: the field keeps its default."""


def _text(value: Any) -> Any:
    return value if isinstance(value, str) else _DROP


def _time(value: Any) -> Any:
    return float(value) if _number(value) else _DROP


def _flag(value: Any) -> Any:
    return value if isinstance(value, bool) else _DROP


def _count(value: Any) -> Any:
    return value if type(value) is int and 0 <= value < 10**9 else _DROP


def _queue(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) and all(isinstance(p, str) for p in value) else _DROP


_FIELD_PARSERS: dict[str, Callable[[Any], Any]] = {
    **{f.name: _text for f in fields(SessionRecord)},
    "created_at": _time,
    "last_activity_at": lambda value: None if value is None else _time(value),
    "turn_in_flight": _flag,
    "turns": _count,
    "usage": usage_from_plain,  # an older file has none; a bad one reads as none
    "queue": _queue,
}


@dataclass(frozen=True)
class RegistrySnapshot:
    """What ``sessions.json`` held."""

    sessions: tuple[SessionRecord, ...] = ()
    saved_at: float | None = None
    problem: str = ""
    """Why the file could not be used as it was ("" when it was fine or absent)."""
    moved_to: Path | None = None
    """Where the unusable file was moved (None when it was not moved)."""


class Registry:
    """``state_dir/sessions.json``: the list of sessions, replaced atomically."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / REGISTRY_FILE
        self.writes = 0
        self._written: tuple[int, int] | None = None
        """(device, inode) of the file this registry last wrote: anything else is another writer's."""

    def load(self, repair: bool = True) -> RegistrySnapshot:
        """Read the registry; an unusable file is moved aside when ``repair`` (never raises)."""
        try:
            raw = read_private(self.path, MAX_REGISTRY_BYTES)
            obj = load_json(raw, str(self.path))
            if not isinstance(obj, dict) or not isinstance(obj.get("sessions"), list):
                raise ParseError(str(self.path), None, "expected an object with a 'sessions' list")
        except FileNotFoundError:
            return RegistrySnapshot()
        except IsADirectoryError:
            return self._unusable("it is a folder, not a file", repair)
        except ParseError as exc:
            return self._unusable(exc.reason if exc.line is None else f"line {exc.line}: {exc.reason}", repair)
        except OSError as exc:
            log.error("cannot read %s: %s", self.path, exc)
            return RegistrySnapshot(problem=f"cannot read {self.path}: {exc.strerror or exc}")
        records = []
        seen: set[str] = set()
        for entry in obj["sessions"]:
            record = SessionRecord.from_json(entry)
            if record is None or record.id in seen:
                log.warning("skipped an unusable entry in %s", self.path.name)
                continue
            seen.add(record.id)
            records.append(record)
        saved = obj.get("saved_at")
        return RegistrySnapshot(
            tuple(records), float(saved) if isinstance(saved, (int, float)) and _number(saved) else None
        )

    def _unusable(self, reason: str, repair: bool) -> RegistrySnapshot:
        moved = move_aside(self.path, reason) if repair else None
        return RegistrySnapshot(problem=f"{self.path} is unusable ({reason})", moved_to=moved)

    def save(self, records: Sequence[SessionRecord], saved_at: float) -> None:
        """Replace the registry (blocking: temp file, fsync, rename).

        Raises OSError, and :class:`RegistryFenced` when another process wrote the file
        since this registry's last write.
        """
        if self._written is not None:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                pass  # removed by hand: writing it again undoes nobody's work
            else:
                if (st.st_dev, st.st_ino) != self._written:
                    raise RegistryFenced(f"{self.path} was replaced by another process; not overwriting it")
        doc = {
            "version": REGISTRY_VERSION,
            "saved_at": saved_at,
            "sessions": [r.to_json() for r in REDACTOR.scrub(list(records))],
        }
        atomic_write(self.path, dump_json(doc, indent=1).encode("utf-8"))
        st = os.stat(self.path)
        self._written = (st.st_dev, st.st_ino)
        self.writes += 1
