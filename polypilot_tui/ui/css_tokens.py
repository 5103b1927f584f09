"""The CSS tokens of the app's style sources, kept from one start to the next.

Textual parses every style source the first frame needs (its widgets' ``DEFAULT_CSS`` and the
app's own files, ~35 of them) at each start: ~13 ms of the dashboard's first frame, most of it
the tokenizer. The tokens of a source depend on its text and where it was read from alone (not
on the theme's variables, put in after), so they are kept in the state folder and read back at
the next start: a source is parsed from its kept tokens (ui/stylesheet.py), and tokenized only
when new (a changed style file, a dialog opened for the first time) or when Textual's tokenizer
may have changed (another Textual: everything kept is dropped).

The file is data only (JSON of names, texts and positions, read against a schema), and kept
tokens are used only when they spell their source exactly (its text without comments, as
Textual's tokens do) with names Textual's tokenizer gives. A file that cannot be read is as if
there were none; a source whose kept tokens are damaged or foreign is tokenized as if none were
kept, and its tokens are replaced at the next write; never is code run nor an error shown.
(Someone who can write the private state folder can still restyle the dashboard from pieces of
its own CSS, token names swapped; they can do worse there.) It is never read or written
through a link, and is written whole when a start tokenized something: after its first frame
(off the dashboard's thread), and as it quits.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path

import msgspec
from textual.css import tokenize as textual_tokenize
from textual.css import tokenizer as textual_tokenizer
from textual.css.tokenizer import Expect, Token
from textual.css.types import CSSLocation

from polypilot_tui.infra.private import NotPrivate, atomic_write, read_private

log = logging.getLogger(__name__)

FILE_NAME = "css-tokens.json"
MAX_BYTES = 2 * 1024 * 1024
"""A kept file larger than this is not read; what is kept past half of it is only what the
start used (the dashboard's own sources are ~100 KB)."""

Row = tuple[str, str, int, int]
"""A token as kept: its name, its text, and the line and column it starts at."""


class _KeptFile(msgspec.Struct, forbid_unknown_fields=True):
    stamp: str
    """The tokenizer the tokens came from (:func:`_tokenizer_stamp`)."""
    tokens: dict[str, list[Row]]
    """Each source's tokens, by :func:`_key`."""


COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
"""A comment: the text Textual's tokens leave out."""
NAMES = frozenset(name for kind in vars(textual_tokenize).values() if isinstance(kind, Expect) for name in kind.names)
"""The names of the tokens Textual's tokenizer gives."""


def _tokenizer_stamp() -> str:
    """What changes when Textual's tokenizer may: an install rewrites its modules (a new path,
    file or size; where every file's time is the same, as in a Nix store, a new path)."""
    parts = ["2"]
    for module in (textual_tokenize, textual_tokenizer):
        path = module.__file__ or ""
        st = os.stat(path)
        parts += [path, str(st.st_ino), str(st.st_size), str(st.st_mtime_ns)]
    return "\0".join(parts)


def _spells(rows: list[Row], css: str) -> bool:
    """Kept tokens that could be Textual's for ``css``: its text without comments, token by
    token, and names its tokenizer gives."""
    return NAMES.issuperset(row[0] for row in rows) and "".join(row[1] for row in rows) == COMMENT.sub("", css)


def _key(css: str, read_from: CSSLocation) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for part in (*read_from, css):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


class KeptTokens:
    """Tokens of style sources: read back from a file, or made now (and kept, once a folder is
    given with :meth:`keep_in`)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self._kept: dict[str, list[Row]] | None = None
        self._used: dict[str, list[Row]] = {}
        self._unwritten = False
        self.tokenized = 0
        """Sources this start tokenized (not found kept)."""

    def keep_in(self, folder: Path) -> None:
        """Read and keep the tokens in ``folder`` (the state folder)."""
        self.path = folder / FILE_NAME
        self._kept = None

    def _loaded(self) -> dict[str, list[Row]]:
        if self._kept is None:
            self._kept = self._read()
        return self._kept

    def _read(self) -> dict[str, list[Row]]:
        if self.path is None:
            return {}
        try:
            kept = msgspec.json.decode(read_private(self.path, MAX_BYTES), type=_KeptFile)
        except FileNotFoundError:
            return {}
        except NotPrivate as exc:  # a link, or not ours: not read (and replaced when written)
            log.warning("the kept CSS tokens were not read: %s", exc)
            return {}
        except (OSError, ValueError) as exc:  # damaged (msgspec's errors are ValueErrors): made anew
            log.info("the kept CSS tokens could not be read (%s); tokenizing anew", exc)
            return {}
        return kept.tokens if kept.stamp == _tokenizer_stamp() else {}

    def tokens(self, css: str, read_from: CSSLocation, *, fresh: bool = False) -> list[Token]:
        """The tokens of ``css`` read from ``read_from``, as Textual's tokenizer gives them
        (``fresh``: tokenized now, whatever is kept). TokenError when the CSS is not valid."""
        key = _key(css, read_from)
        rows = None if fresh else self._loaded().get(key)
        if rows is not None and _spells(rows, css):
            self._used[key] = rows
            return [Token(name, value, read_from, css, (line, column)) for name, value, line, column in rows]
        made = list(textual_tokenize.tokenize(css, read_from))
        self._used[key] = [(token.name, token.value, *token.location) for token in made]
        self.tokenized += 1
        self._unwritten = True
        return made

    def pending(self) -> bytes | None:
        """What to write (:meth:`write`) when this start tokenized something since the last
        write: the file's tokens and this start's; else None (the file stays as it was)."""
        if self.path is None or not self._unwritten:
            return None
        self._unwritten = False
        stamp = _tokenizer_stamp()
        data = msgspec.json.encode(_KeptFile(stamp, {**self._loaded(), **self._used}))
        if len(data) > MAX_BYTES // 2:  # sources that changed often (a theme's author at work): this start's
            data = msgspec.json.encode(_KeptFile(stamp, self._used))
        return data

    def write(self, data: bytes) -> None:
        """Replace the file with ``data`` (from :meth:`pending`; in any thread). A failure is
        logged: the next start tokenizes again."""
        if self.path is None:
            return
        try:
            atomic_write(self.path, data)
        except OSError as exc:
            log.warning("the CSS tokens could not be kept in %s: %s", self.path, exc)
