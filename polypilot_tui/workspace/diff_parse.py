"""``git diff`` text to a :class:`~polypilot_tui.domain.changeset.Changeset`, with ``unidiff``.

Pure: the git calls live in ``git.py``; this only reads their output. The output is split
at each ``diff --git`` line and every file is parsed on its own, so one file that unidiff
cannot read becomes an entry that says why instead of losing the whole review.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator

from unidiff.constants import LINE_TYPE_ADDED, LINE_TYPE_EMPTY, LINE_TYPE_NO_NEWLINE, LINE_TYPE_REMOVED
from unidiff.errors import UnidiffParseError
from unidiff.patch import Hunk as UnidiffHunk
from unidiff.patch import PatchedFile, PatchSet

from polypilot_tui.domain.changeset import Changeset, FileDiff, FileStatus, Hunk, HunkLines, LineKind

DEV_NULL = "/dev/null"
_FILE_START = "diff --git "

_C_ESCAPES = {b"a": b"\a", b"b": b"\b", b"t": b"\t", b"n": b"\n", b"v": b"\v", b"f": b"\f", b"r": b"\r"}
_ESCAPE = re.compile(rb'\\([0-7]{3}|[abtnvfr"\\])')


def decode_git_path(raw: str) -> str:
    """A name as git prints it (maybe ``"quoted\\303\\251"``), as the real name.

    Git quotes a name with bytes outside ASCII as C escapes of its bytes. Those bytes are
    decoded as UTF-8; a name that is not UTF-8 (a Latin-1 ``café``) is read as Latin-1,
    which keeps every byte (``name.encode("latin-1")`` gives the file's name back).
    """
    raw = raw.strip()
    if len(raw) < 2 or not (raw.startswith('"') and raw.endswith('"')):
        return raw
    # The caller decoded git's output as UTF-8 with errors="replace"; escapes are ASCII.
    body = raw[1:-1].encode("utf-8", errors="replace")

    def unescape(match: re.Match[bytes]) -> bytes:
        code = match.group(1)
        if len(code) == 3:
            return bytes([int(code, 8) & 0xFF])
        return _C_ESCAPES.get(code, code)

    data = _ESCAPE.sub(unescape, body)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _side_path(raw: str | None, prefix: str) -> str:
    if raw is None:
        return ""
    name = decode_git_path(raw)
    if name == DEV_NULL:
        return DEV_NULL
    return name[len(prefix) :] if name.startswith(prefix) else name


def _chunks(text: str) -> Iterator[str]:
    """Each file's part of the output (content lines never start with ``diff --git``)."""
    chunk: list[str] = []
    for line in _split_newlines(text):
        if line.startswith(_FILE_START) and chunk:
            yield "".join(chunk)
            chunk = []
        chunk.append(line)
    if chunk:
        yield "".join(chunk)


def _split_newlines(text: str) -> list[str]:
    # str.splitlines also breaks at \r, \x0b, \x1c, \u2028…: inside a line those are content.
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _header_value(chunk: str, key: str) -> str | None:
    for line in chunk.split("\n"):
        if line.startswith("@@"):
            return None
        if line.startswith(key):
            return decode_git_path(line[len(key) :])
    return None


def _header_paths(chunk: str) -> tuple[str, str]:
    """Old and new path from the ``diff --git a/x b/y`` line (best effort, for a file that failed)."""
    first = chunk.split("\n", 1)[0][len(_FILE_START) :]
    if first.startswith('"'):
        end = first.find('" ', 1)
        if end > 0:
            return _side_path(first[: end + 1], "a/"), _side_path(first[end + 2 :], "b/")
    middle = first.find(" b/")
    if middle > 0:
        return _side_path(first[:middle], "a/"), _side_path(first[middle + 1 :], "b/")
    return first, first


def _line_text(value: str) -> str:
    """A line's text without its newline (``\\r\\n`` counts as one; a lone ``\\r`` is content)."""
    if value.endswith("\n"):
        value = value[:-1]
        if value.endswith("\r"):
            value = value[:-1]
    return value


def _kind(line_type: str) -> LineKind:
    if line_type == LINE_TYPE_ADDED:
        return LineKind.ADDED
    if line_type == LINE_TYPE_REMOVED:
        return LineKind.REMOVED
    if line_type == LINE_TYPE_NO_NEWLINE:
        return LineKind.NOTE
    return LineKind.CONTEXT


def _hunk_lines(hunk: UnidiffHunk) -> HunkLines:
    """A hunk's lines as the changeset keeps them (columns: no object per line)."""
    kinds: list[str] = []
    texts: list[str] = []
    old_nos: list[int | None] = []
    new_nos: list[int | None] = []
    for line in hunk:
        if line.line_type == LINE_TYPE_EMPTY:  # a blank line after the hunk, not part of it
            continue
        kind = _kind(line.line_type)
        kinds.append(kind.value)
        if kind is LineKind.NOTE:
            texts.append(line.value.strip())
            old_nos.append(None)
            new_nos.append(None)
        else:
            texts.append(_line_text(line.value))
            old_nos.append(line.source_line_no)
            new_nos.append(line.target_line_no)
    return HunkLines("".join(kinds), texts, old_nos, new_nos)


def _file(patched: PatchedFile, chunk: str, untracked: Collection[str], max_lines: int) -> FileDiff:
    old = _header_value(chunk, "rename from ") or _side_path(patched.source_file, "a/")
    new = _header_value(chunk, "rename to ") or _side_path(patched.target_file, "b/")
    if old == DEV_NULL:
        path, old_path = new, ""
        status = FileStatus.UNTRACKED if new in untracked else FileStatus.ADDED
    elif new == DEV_NULL:
        path, old_path, status = old, "", FileStatus.DELETED
    elif old != new:
        path, old_path, status = new, old, FileStatus.RENAMED
    else:
        path, old_path, status = new, "", FileStatus.MODIFIED
    added, removed = patched.added, patched.removed
    if patched.is_binary_file:
        return FileDiff(path, status, added, removed, old_path, binary=True)
    total = sum(len(hunk) for hunk in patched)
    if total > max_lines:
        return FileDiff(path, status, added, removed, old_path, omitted=f"too large to show ({total:,} lines)")
    hunks = tuple(
        Hunk(
            hunk.source_start,
            hunk.source_length,
            hunk.target_start,
            hunk.target_length,
            _line_text(hunk.section_header),
            _hunk_lines(hunk),
        )
        for hunk in patched
    )
    return FileDiff(path, status, added, removed, old_path, hunks=hunks)


def _failed(chunk: str, reason: str) -> FileDiff:
    old, new = _header_paths(chunk) if chunk.startswith(_FILE_START) else ("", "")
    path = new if new and new != DEV_NULL else old
    return FileDiff(path or "(unnamed)", FileStatus.MODIFIED, omitted=f"could not read the diff ({reason})")


def _parse_chunk(chunk: str, untracked: Collection[str], max_lines: int) -> list[FileDiff]:
    try:
        patches = PatchSet(_split_newlines(chunk))
        return [_file(patched, chunk, untracked, max_lines) for patched in patches]
    except UnidiffParseError as exc:  # what unidiff raises on a diff it cannot read: an entry says so
        return [_failed(chunk, f"{type(exc).__name__}: {exc}"[:200])]


def parse_diff(text: str, base: str, *, max_lines_per_file: int = 20000, untracked: Collection[str] = ()) -> Changeset:
    """The files of ``git diff`` output (untracked files' ``--no-index`` diffs appended).

    ``untracked`` names the new files that git does not track yet (their diffs read like
    added files): they get :attr:`FileStatus.UNTRACKED`. Never raises on odd input.
    """
    files: list[FileDiff] = []
    for chunk in _chunks(text):
        if chunk.strip():
            files.extend(_parse_chunk(chunk, frozenset(untracked), max_lines_per_file))
    return Changeset(base, tuple(files))
