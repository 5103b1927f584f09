"""Every size limit on what the engine accepts, keeps, saves and sends — in one place, derived
so that they compose: whatever the engine accepts, it can save, read back and send.

Three kinds of limit:

- **What a user gives** (prompts, queues, names, the prompt box): refused beyond its limit
  with a message that names it (:class:`LimitExceeded`); a user's text is never cut.
- **What an agent gives** (a reply, a tool's output, one message line): kept up to its limit;
  the rest is cut with a marker that says how much was not kept (:func:`bounded`).
- **What a store or the stream must take**: derived from the two above — the registry's
  record and file, a spill file, one stream event — so the sum of everything accepted
  always fits. ``tests/unit/test_limits.py`` checks the derivations; the engine test fills
  every limit and saves, restarts, reads back and attaches.

User text is counted as saved (:func:`saved_bytes`: the bytes of its JSON string, escapes
included), which is what the registry and the wire carry. Agent text is counted in
characters; one character costs at most :data:`CHAR_BYTES` saved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from polypilot_tui.domain.safe_json import MAX_DEPTH, json_text_bytes
from polypilot_tui.domain.text import clip

KIB = 1024
MIB = 1024 * KIB

# ---- what a user gives: refused beyond, never cut ----------------------------------------
PROMPT_BYTES = 1 * MIB
"""One prompt, as saved."""
QUEUE_PROMPTS = 100
"""Prompts queued behind a running turn, per session."""
QUEUE_BYTES = 8 * MIB
"""Their text, per session, as saved."""
HELD_BYTES = 16 * MIB
"""Prompt text the engine holds over all its sessions, as saved: queued, in flight, and
interrupted (offered for resending). Every one of them is in the registry."""
SESSIONS = 500
"""Sessions one engine holds."""
NAME_CHARS = 200
"""A session's name (a URL with a password in it is one: it is redacted where it is written)."""
DRAFT_CHARS = 4 * MIB
"""What the prompt box holds (a paste that would make it longer is refused); a draft is kept
whole across a restart, in a file of its own."""

# ---- what an agent gives: kept up to, the rest cut with a marker -------------------------
AGENT_LINE_BYTES = 64 * MIB
"""One message line from an agent; a longer one is dropped, and the session says so."""
AGENT_READ_BYTES = 20_000_000
"""A file handed to an agent in one read (fs/read_text_file); a bigger one is refused."""
ROW_CHARS = PROMPT_BYTES
"""The text of one chat row an agent wrote (a reply, its reasoning, an error); a prompt
always fits (:data:`PROMPT_BYTES` saved is at most as many characters)."""
TOOL_TEXT_CHARS = 20_000
"""What a tool row keeps of the tool's output."""
REASON_CHARS = 2000
"""Why a session is in its status (an agent's error text, a watchdog reason)."""
TITLE_CHARS = 80
"""The title an agent gives its session."""
ID_CHARS = 256
"""An id or a short name an agent or the catalog gives: model, agent session, tool, option."""
PATH_CHARS = 4096
"""A folder (Linux's PATH_MAX)."""
REF_CHARS = 255
"""A git branch or base name."""
SANDBOX_HOSTS = 16
"""Hosts of one sandbox's network rule."""
SANDBOX_HOST_CHARS = 128
"""One host of a network rule (``host:port``)."""
PERMISSION_OPTIONS = 8
"""Options of one permission request (agents offer four)."""
PERMISSION_TEXT_CHARS = 2000
"""What a permission request says of its tool."""
OPTION_LABEL_CHARS = 300
"""One permission option's label (an agent may state the scope at the end)."""

# ---- what a view shows of the prompts it does not carry whole ----------------------------
PREVIEW_CHARS = 200
"""The first words of a queued or interrupted prompt in a view (the text is asked for when needed)."""
QUEUE_PREVIEWS = 20
"""Queued prompts a view shows the first words of; the rest only by count and size."""

# ---- derived: what the stores and the stream must take -----------------------------------
CHAR_BYTES = 6
"""The most one character costs as saved (``\\u0001``, a lone surrogate)."""
REDACTION_GROWTH = 3
"""The most the redactor grows a text on its way to a file (``A_KEY=x`` becomes
``A_KEY=[redacted]``); tests/unit/test_limits.py holds the redactor to it."""
STRUCTURE_BYTES = 4 * KIB
"""Keys, numbers and punctuation of one record or view around its texts."""

_RECORD_TEXT_CHARS = (
    NAME_CHARS
    + TITLE_CHARS
    + REASON_CHARS
    + 2 * PATH_CHARS
    + 7 * ID_CHARS
    + 2 * REF_CHARS
    + SANDBOX_HOSTS * SANDBOX_HOST_CHARS
)
RECORD_FIELDS_BYTES = CHAR_BYTES * _RECORD_TEXT_CHARS + STRUCTURE_BYTES
"""One registry record without its prompts."""
SESSION_PROMPT_BYTES = QUEUE_BYTES + 2 * PROMPT_BYTES
"""Prompt text one session holds: its queue, the prompt in flight and an interrupted one."""
_ITEM_BYTES = 4
"""Quotes, comma and space around one saved prompt."""
RECORD_BYTES = RECORD_FIELDS_BYTES + REDACTION_GROWTH * SESSION_PROMPT_BYTES + _ITEM_BYTES * (QUEUE_PROMPTS + 2)
"""One registry record, whole: the most a line of ``sessions.json`` may hold."""
REGISTRY_BYTES = (
    SESSIONS * (RECORD_FIELDS_BYTES + _ITEM_BYTES * (QUEUE_PROMPTS + 2)) + REDACTION_GROWTH * HELD_BYTES + KIB
)
"""The whole of ``sessions.json``: every session at its limits and all the prompts held."""

_VIEW_TEXT_CHARS = (
    3 * NAME_CHARS  # name, and the failure's title and fix's short parts
    + TITLE_CHARS
    + 5 * REASON_CHARS  # reason, last outcome's, workspace problem, failure detail and fix
    + 3 * PATH_CHARS  # cwd, workspace folder and repository
    + 3 * REF_CHARS  # branch, workspace branch and base
    + 12 * ID_CHARS  # id, agent, model, agent session, tool, intent, waiting for, permission ids, usage
    + PERMISSION_TEXT_CHARS
    + PERMISSION_OPTIONS * (2 * ID_CHARS + OPTION_LABEL_CHARS)
    + (QUEUE_PREVIEWS + 1) * PREVIEW_CHARS
)
VIEW_BYTES = CHAR_BYTES * _VIEW_TEXT_CHARS + STRUCTURE_BYTES + QUEUE_PROMPTS * 96
"""One session's view as sent (each queued prompt adds its key, size and line count)."""
ROW_BYTES = CHAR_BYTES * (ROW_CHARS + PATH_CHARS + 3 * ID_CHARS) + STRUCTURE_BYTES
"""One chat row as sent or spilled (its text, tool name, detail and ids)."""
SNAPSHOT_BYTES = SESSIONS * VIEW_BYTES + 64 * KIB
"""The stream's first event: every session's view (the replies streaming go as events of their own)."""
EVENT_BYTES = max(SNAPSHOT_BYTES, VIEW_BYTES + ROW_BYTES)
"""One stream event: the snapshot, or one session's view with its reply (or the part streamed
since the last), or one row."""
BODY_BYTES = 3 * PROMPT_BYTES + 64 * KIB
"""One request body: the largest prompt as a client may write it (ASCII-escaped JSON is at
most three times its size as saved) and the rest of the request."""
SPILL_BYTES = REGISTRY_BYTES + 4 * ROW_BYTES + 64 * KIB
"""One spill file: the session list and rows until the next would not fit (a quit with more
unsaved writes several files; each row fits in one)."""
DRAFT_FILE_BYTES = REDACTION_GROWTH * CHAR_BYTES * DRAFT_CHARS + KIB
"""One saved draft."""


class LimitExceeded(ValueError):
    """Something given to the engine is larger than a limit allows; the message names it."""


def saved_bytes(text: str) -> int:
    """What ``text`` costs as saved: the UTF-8 bytes of its JSON string, without the quotes."""
    return json_text_bytes(text) - 2


def size_words(size: int) -> str:
    """A byte count for people ("3.1 MB", "900 KB", "12 bytes")."""
    if size >= 1_000_000:
        return f"{size / 1_000_000:.1f} MB"
    if size >= 10_000:
        return f"{size // 1000:,} KB"
    return f"{size:,} byte{'' if size == 1 else 's'}"


def sizes_words(size: int, limit: int) -> tuple[str, str]:
    """Two byte counts for people, exact where rounding would make them read the same."""
    if size_words(size) == size_words(limit):
        return f"{size:,} byte{'' if size == 1 else 's'}", f"{limit:,} bytes"
    return size_words(size), size_words(limit)


def check_prompt(text: str) -> int:
    """The prompt's size as saved; :class:`LimitExceeded` when one prompt may not be that big."""
    size = saved_bytes(text)
    if size > PROMPT_BYTES:
        said, most = sizes_words(size, PROMPT_BYTES)
        raise LimitExceeded(
            f"the prompt is {said}; one prompt may hold at most {most} "
            "(put the text in a file and give the agent its path)"
        )
    return size


CUT_NOTE_CHARS = 64
"""Room :func:`bounded` leaves within its limit for :func:`cut_note`."""


def cut_note(count: int) -> str:
    """What follows a text cut short: "…" right at the cut (the redactor reads it as one and
    removes the start of a secret cut through there), then how many characters were not kept."""
    return f"…\n[{count:,} more characters not kept]"


def bounded(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters; else its start and :func:`cut_note`,
    ``limit`` characters in all ("…" alone under a short limit: a name, an id). An agent's
    text only: a user's text is refused, never cut."""
    if len(text) <= limit:
        return text
    if limit < 2 * CUT_NOTE_CHARS:
        return clip(text, limit)
    keep = limit - CUT_NOTE_CHARS
    return text[:keep] + cut_note(len(text) - keep)


def has_longer_text(value: Any, limit: int, depth: int = MAX_DEPTH) -> bool:
    """Whether JSON-like ``value`` holds a string longer than ``limit`` (``depth`` levels down)."""
    if type(value) is str:
        return len(value) > limit
    if depth > 0 and isinstance(value, Mapping):
        return any(has_longer_text(v, limit, depth - 1) for v in value.values())
    if depth > 0 and isinstance(value, list):
        return any(has_longer_text(v, limit, depth - 1) for v in value)
    return False


def bounded_texts(value: Any, limit: int, depth: int = MAX_DEPTH) -> Any:
    """A copy of JSON-like ``value`` with every string longer than ``limit`` cut by :func:`bounded`."""
    if type(value) is str:
        return bounded(value, limit)
    if depth > 0 and isinstance(value, Mapping):
        return {k: bounded_texts(v, limit, depth - 1) for k, v in value.items()}
    if depth > 0 and isinstance(value, list):
        return [bounded_texts(v, limit, depth - 1) for v in value]
    return value
