"""The session registry, ``state_dir/sessions.json``: which sessions exist and whether a
turn was in flight.

It is replaced atomically (temp file, fsync, rename), so a crash leaves the old file or
the new one, never half of either. One session per line, so that what cannot be read loses
that session alone: a file that cannot be read whole (damaged, or larger than an engine
ever writes: limits.REGISTRY_BYTES) is read a session at a time, bounded by
limits.RECORD_BYTES each; the sessions that cannot be read are named, the others come back,
and the file is moved aside (the caller tells the user where). A field that does not fit (a
NaN time, a number as a name) is dropped, never the session.

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
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, BinaryIO

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.limits import (
    ID_CHARS,
    NAME_CHARS,
    PATH_CHARS,
    REASON_CHARS,
    RECORD_BYTES,
    REF_CHARS,
    REGISTRY_BYTES,
    SANDBOX_HOST_CHARS,
    SANDBOX_HOSTS,
    SESSIONS,
    TITLE_CHARS,
    bounded,
)
from polypilot_tui.domain.safe_json import ParseError, dump_json, load_json
from polypilot_tui.domain.usage import Usage, usage_from_plain
from polypilot_tui.infra.lines import bounded_lines
from polypilot_tui.infra.private import atomic_write, move_aside, open_private
from polypilot_tui.infra.redact import RepeatedTexts

log = logging.getLogger(__name__)

REGISTRY_FILE = "sessions.json"
REGISTRY_VERSION = 1


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
    sandbox: str = ""
    """Its sandbox's mode ("" or "off": none). One this version cannot read is kept as
    :data:`UNREADABLE_SANDBOX`, which restores as the strictest sandbox, never as none."""
    sandbox_network: tuple[str, ...] | None = None
    """Its sandbox's network rule (None: the machine's network)."""

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
        if any(len(values.get(k, "")) > limit for k, limit in _KEY_FIELD_CHARS.items()):
            return None  # an id or a folder no engine writes: not cut into another one
        for key, limit in _TEXT_FIELD_CHARS.items():
            if key in values:
                values[key] = bounded(values[key], limit)
        return cls(**values)


_KEY_FIELD_CHARS = {
    "id": ID_CHARS,
    "agent": ID_CHARS,
    "agent_session_id": ID_CHARS,
    "cwd": PATH_CHARS,
    "repo": PATH_CHARS,
    "branch": REF_CHARS,
    "base": REF_CHARS,
    "base_commit": ID_CHARS,
}
"""Fields that name something (a record with a longer one is not ours)."""
_TEXT_FIELD_CHARS = {
    "name": NAME_CHARS,
    "title": TITLE_CHARS,
    "reason": REASON_CHARS,
    "model": ID_CHARS,
    "model_choice": ID_CHARS,
    "status": ID_CHARS,
    "isolation": ID_CHARS,
}
"""Fields that only say something (a longer one, from an older version, is read cut)."""
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


UNREADABLE_SANDBOX = "unreadable"
"""A sandbox field that does not fit: kept as such, so the session never restores unsandboxed."""


def _sandbox(value: Any) -> Any:
    if isinstance(value, str) and len(value) <= ID_CHARS:
        return value
    return UNREADABLE_SANDBOX


def _hosts(value: Any) -> Any:
    if value is None:
        return None
    if (
        isinstance(value, list)
        and len(value) <= SANDBOX_HOSTS
        and all(isinstance(h, str) and 0 < len(h) <= SANDBOX_HOST_CHARS for h in value)
    ):
        return tuple(value)
    return ()  # a rule that cannot be read (or longer than any engine writes) allows no host: never looser


COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
"""A commit's full id (SHA-1 or SHA-256), as the engine saves a worktree's start."""


def _commit(value: Any) -> Any:
    """A commit id, or dropped: the value is handed to ``git diff``, where anything else (a
    ``--output=FILE`` planted in the file) would be read as an option. Without it a worktree's
    changes are counted from its branch's base, or from HEAD."""
    return value if isinstance(value, str) and COMMIT_ID.fullmatch(value) else _DROP


_FIELD_PARSERS: dict[str, Callable[[Any], Any]] = {
    **{f.name: _text for f in fields(SessionRecord)},
    "base_commit": _commit,
    "created_at": _time,
    "last_activity_at": lambda value: None if value is None else _time(value),
    "turn_in_flight": _flag,
    "turns": _count,
    "usage": usage_from_plain,  # an older file has none; a bad one reads as none
    "queue": _queue,
    "sandbox": _sandbox,
    "sandbox_network": _hosts,
}


@dataclass(frozen=True)
class RegistrySnapshot:
    """What ``sessions.json`` held."""

    sessions: tuple[SessionRecord, ...] = ()
    saved_at: float | None = None
    problem: str = ""
    """Why the file, or some of its sessions, could not be used ("" when it was fine or absent)."""
    moved_to: Path | None = None
    """Where the file was moved (None when it was not moved): what could not be read is there."""
    lost: tuple[str, ...] = ()
    """The sessions that could not be read back, each named as far as it could be, and why."""


_ID = re.compile(rb'"id":\s*"([A-Za-z0-9_.:-]{1,64})"')
_NAME = re.compile(rb'"name":\s*"([^"\\]{1,60})"')
_SAVED_AT = re.compile(rb'"saved_at":\s*(-?[0-9][0-9.eE+-]{0,30})')
_OLD_START = (b"  {\n", b"  {\r\n")
"""An older file (indented JSON) starts each record on a line of its own, at this indent."""
_OLD_END = (b"  }", b"  },")
_PEEK = 400
"""Bytes of a lost record read to name it."""


def _named(head: bytes, why: str) -> str:
    """ "session ID (“name”): why", from the first bytes of a record that could not be read."""
    found, name = _ID.search(head[:_PEEK]), _NAME.search(head[:_PEEK])
    who = f"session {found.group(1).decode()}" if found else "a session"
    if name:
        who += f" (“{name.group(1).decode('utf-8', 'replace')}”)"
    return f"{who}: {why}"


class _Salvage:
    """Records read one by one from a file that cannot be read whole: each one that cannot be
    read (damaged, larger than a record may be, past what an engine holds) is lost alone."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.records: list[SessionRecord] = []
        self.lost: list[str] = []
        self.saved_at: float | None = None
        self._seen: set[str] = set()
        self._total = 0

    def read(self, file: BinaryIO) -> None:
        gathered: list[bytes] | None = None  # an older file's record, line by line
        size = 0
        too_big = f"larger than {RECORD_BYTES:,} bytes"
        for line, _ in bounded_lines(file, RECORD_BYTES + 1):  # one cut is larger than a record
            if line in _OLD_START:
                if gathered:
                    self.lost.append(_named(b"".join(gathered), "damaged (it has no end)"))
                gathered, size = [line], len(line)
            elif gathered is not None:
                size += len(line)
                if size <= RECORD_BYTES:
                    gathered.append(line)
                elif gathered:
                    self.lost.append(_named(b"".join(gathered), too_big))
                    gathered = []  # the rest of its lines are skipped up to its end
                if line.rstrip() in _OLD_END:
                    if gathered:
                        self.take(b"".join(gathered))
                    gathered = None
            elif len(line) > RECORD_BYTES:
                self.lost.append(_named(line, too_big))
            elif (body := line.strip().rstrip(b",")).startswith(b'{"id"') and body.endswith(b"}"):
                self.take(body)
            elif self.saved_at is None and (found := _SAVED_AT.search(line[:_PEEK])):
                self.saved_at = _time_or_none(found.group(1))
        if gathered:
            self.lost.append(_named(b"".join(gathered), "cut off at the end of the file"))

    def take(self, raw: bytes) -> None:
        """One record's JSON (the comma after it, if any, is not its)."""
        raw = raw.strip().removesuffix(b",")
        try:
            entry = load_json(raw, self.source)
        except ParseError as exc:
            self.lost.append(_named(raw, f"damaged ({exc.reason})"))
            return
        self.keep(entry, raw[:_PEEK], len(raw))

    def keep(self, entry: Any, head: bytes, size: int) -> None:
        """One parsed record (``head``: its first bytes, to name it if it is lost; ``size``: its bytes)."""
        record = SessionRecord.from_json(entry)
        if record is None:
            self.lost.append(_named(head, "not a session record"))
        elif record.id in self._seen:
            self.lost.append(_named(head, "its id is taken by an earlier session in the file"))
        elif len(self.records) >= SESSIONS or self._total + size > REGISTRY_BYTES:
            self.lost.append(_named(head, f"past the {SESSIONS} sessions and {REGISTRY_BYTES:,} bytes an engine holds"))
        else:
            self._seen.add(record.id)
            self._total += size
            self.records.append(record)


def _time_or_none(raw: bytes) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


class Registry:
    """``state_dir/sessions.json``: the list of sessions, replaced atomically."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / REGISTRY_FILE
        self.writes = 0
        self._written: tuple[int, int] | None = None
        """(device, inode) of the file this registry last wrote: anything else is another writer's."""
        self._redacted = RepeatedTexts()
        """Every save writes every session: its prompts, queued for long, are redacted once."""

    def load(self, repair: bool = True) -> RegistrySnapshot:
        """Read the registry (never raises). A session that cannot be read is lost alone: the
        others are read back, and the file is moved aside when ``repair`` (nothing in it is
        lost: the next save writes the sessions read back)."""
        salvage = _Salvage(str(self.path))
        try:
            with os.fdopen(open_private(self.path, os.O_RDONLY), "rb") as file:  # never through a link
                size = os.fstat(file.fileno()).st_size
                why = f"larger than {REGISTRY_BYTES:,} bytes"
                if size <= REGISTRY_BYTES:
                    why = self._whole(file.read(REGISTRY_BYTES + 1), salvage)
                    if not why:
                        return self._snapshot(salvage, repair)
                    log.warning("%s cannot be read whole (%s); reading it session by session", self.path, why)
                file.seek(0)
                salvage = _Salvage(str(self.path))
                salvage.read(file)
        except FileNotFoundError:
            return RegistrySnapshot()
        except IsADirectoryError:
            return self._unusable("it is a folder, not a file", repair)
        except OSError as exc:
            log.error("cannot read %s: %s", self.path, exc)
            return RegistrySnapshot(problem=f"cannot read {self.path}: {exc.strerror or exc}")
        if not salvage.records and not salvage.lost:
            return self._unusable(why, repair)
        return self._snapshot(salvage, repair)

    def _whole(self, raw: bytes, salvage: _Salvage) -> str:
        """Read the file as one document (the usual case) into ``salvage``; "" when it could
        be, else why not."""
        if len(raw) > REGISTRY_BYTES:
            return f"larger than {REGISTRY_BYTES:,} bytes"  # it grew while being read
        try:
            obj = load_json(raw, str(self.path))
        except ParseError as exc:
            return exc.reason if exc.line is None else f"line {exc.line}: {exc.reason}"
        if not isinstance(obj, dict) or not isinstance(obj.get("sessions"), list):
            return "expected an object with a 'sessions' list"
        for entry in obj["sessions"]:
            who = {k: entry.get(k) for k in ("id", "name")} if isinstance(entry, dict) else {}
            salvage.keep(entry, dump_json(who).encode(), 0)  # the file is within bounds: no sizes to add
        saved = obj.get("saved_at")
        salvage.saved_at = float(saved) if isinstance(saved, (int, float)) and _number(saved) else None
        return ""

    def _snapshot(self, salvage: _Salvage, repair: bool) -> RegistrySnapshot:
        records, lost = tuple(salvage.records), tuple(salvage.lost)
        if not lost:
            return RegistrySnapshot(records, salvage.saved_at)
        log.error("%d session(s) of %s could not be read back: %s", len(lost), self.path, "; ".join(lost))
        moved = move_aside(self.path, f"{len(lost)} session(s) could not be read") if repair else None
        problem = f"{len(lost)} session(s) in {self.path} could not be read back ({'; '.join(lost)})"
        return RegistrySnapshot(records, salvage.saved_at, problem, moved, lost)

    def _unusable(self, reason: str, repair: bool) -> RegistrySnapshot:
        moved = move_aside(self.path, reason) if repair else None
        return RegistrySnapshot(problem=f"{self.path} is unusable ({reason})", moved_to=moved)

    def save(self, records: Sequence[SessionRecord], saved_at: float) -> None:
        """Replace the registry (blocking: temp file, fsync, rename), one session per line (a
        damaged line loses that session alone).

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
        head = dump_json({"version": REGISTRY_VERSION, "saved_at": saved_at})[:-1]
        lines = ",\n".join(dump_json(r.to_json()) for r in self._redacted.scrub(list(records)))
        atomic_write(self.path, f'{head}, "sessions": [\n{lines}\n]}}\n'.encode())
        st = os.stat(self.path)
        self._written = (st.st_dev, st.st_ino)
        self.writes += 1
