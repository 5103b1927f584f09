"""A commit message drafted for a session's work: what the user asked for, then the files.

The subject is the session's first real request (a review of the changes is about the work,
not the work) cut at a word boundary, never mid-word and never with "…"; without one, it
says what changed ("Add notes.md", "Update 3 files in src/"). The body keeps the whole
request when the subject could not, and names the files. The user reads and edits it.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence

from polypilot_tui.domain.changeset import FileStatus, is_review_prompt
from polypilot_tui.domain.text import strip_control

SUBJECT_LIMIT = 72
"""git's convention for a subject line."""
BODY_LIMIT = 2000
"""Characters of the request kept in the body; a longer one says how much more there was."""
MAX_FILES = 20
"""Files named in the body; the others are counted."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_VERBS = {
    FileStatus.ADDED: "Add",
    FileStatus.UNTRACKED: "Add",
    FileStatus.DELETED: "Delete",
    FileStatus.RENAMED: "Rename",
    FileStatus.MODIFIED: "Update",
}


def first_request(prompts: Iterable[str]) -> str:
    """The first prompt that asks for work: not blank, not a review of the changes."""
    for prompt in prompts:
        text = strip_control(prompt).strip()
        if text and not is_review_prompt(text):
            return text
    return ""


def _cut_at_word(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text``, ending at a word's end ("" when its first
    word alone is longer)."""
    if len(text) <= limit:
        return text
    space = text.rfind(" ", 0, limit + 1)
    return text[:space].rstrip(" ,;:-") if space > 0 else ""


def subject_of(request: str, limit: int = SUBJECT_LIMIT) -> str:
    """The request's first sentence (or as many of its first words as fit), capitalised, or
    "" when not even its first word fits."""
    line = " ".join(next((part for part in request.splitlines() if part.strip()), "").split())
    sentence = _SENTENCE_END.split(line, maxsplit=1)[0]
    subject = _cut_at_word(sentence, limit).rstrip(".")
    return subject[:1].upper() + subject[1:]


def changes_subject(files: Sequence[tuple[FileStatus, str]], limit: int = SUBJECT_LIMIT) -> str:
    """What changed, in a line: ``Add notes.md``, ``Update a.py and b.py``, ``Change 4 files in src/``."""
    if not files:
        return "Changes from polypilot"
    verbs = {_VERBS[status] for status, _ in files}
    verb = verbs.pop() if len(verbs) == 1 else "Change"
    names = [path for _, path in files]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"
    if len(f"{verb} {listed}") <= limit:
        return f"{verb} {listed}"
    folder = posixpath.commonpath(names) if len(names) > 1 else posixpath.dirname(names[0])
    where = f" in {folder}/" if folder else ""
    count = f"{len(names)} file{'s' if len(names) != 1 else ''}"
    return _cut_at_word(f"{verb} {count}{where}", limit) or f"{verb} {count}"


def _bounded(text: str, limit: int = BODY_LIMIT) -> str:
    if len(text) <= limit:
        return text
    kept = text[:limit]
    cut = max(kept.rfind(" "), kept.rfind("\n"))
    kept = kept[:cut] if cut > limit // 2 else kept
    return f"{kept.rstrip()} [… {len(text) - len(kept.rstrip()):,} more characters of the request]"


def _plain(text: str) -> str:
    return " ".join(text.split()).rstrip(".").lower()


def draft_message(prompts: Iterable[str], files: Sequence[tuple[FileStatus, str]]) -> str:
    """The message for committing ``files`` (status and path) after a session given ``prompts``
    (the user's, in order)."""
    request = first_request(prompts)
    subject = subject_of(request) if request else ""
    paragraphs = []
    if not subject:
        subject = changes_subject(files)
    if request and _plain(request) != _plain(subject):  # the subject did not say it all
        paragraphs.append(_bounded(request))
    if files:
        shown = [f"- {path}" for _, path in files[:MAX_FILES]]
        if len(files) > MAX_FILES:
            shown.append(f"- and {len(files) - MAX_FILES} more")
        paragraphs.append("\n".join(shown))
    return "\n\n".join([subject, *paragraphs])
