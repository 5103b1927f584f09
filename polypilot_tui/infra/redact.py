"""The redactor: one place that knows every secret the app knows, applied before anything
is written (logs and their tracebacks, recordings, the registry, history, transcripts,
agent stderr logs, ``status``).

It removes two kinds of secret:

- **known values**: the values of secret-named environment variables, the keys agents name
  with ``api_key_env``, and every agent ``env`` value that is named like a secret or looks
  like a key. Fed once at start (:meth:`Redactor.learn_environment`,
  :meth:`Redactor.learn_agents`); the process shares one instance, :data:`REDACTOR`.
- **shapes**, even when the value was never seen (:mod:`~polypilot_tui.infra.secret_shapes`):
  well-known token formats, the password of a URL, PEM private keys, ``Authorization``
  headers, and values after a secret's name (``DB_PASSWORD=…``, ``"apiKey": "…"``).

Text that was cut before it got here ("…" previews, a streamed delta, a piece of a long
stderr line) may hold only the start or the end of a secret: those partial secrets are
removed too, and a piece read with the text that came before it (:meth:`Redactor.fragment`'s
``before``, :class:`StreamTails`) is redacted as part of the whole, so a secret split
across two pieces is found.

Records are redacted whole (:meth:`Redactor.scrub`): every string of a dataclass, mapping,
list or tuple, however deeply nested, so a field added later cannot be forgotten.
"""

from __future__ import annotations

import copy
import os
import re
import threading
from collections.abc import Collection, Hashable, Iterable, Iterator, Mapping
from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Any, Protocol, TypeVar, cast

from polypilot_tui.domain.tool_servers import CAPABILITY_ENV
from polypilot_tui.infra.secret_shapes import (
    Span,
    context_start,
    cut_spans,
    is_secret_key,
    looks_like_key,
    shape_spans,
)

__all__ = ["REDACTED", "REDACTOR", "Redactor", "StreamTails", "is_secret_key", "looks_like_key"]

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
"""Shorter values are not treated as secrets (they would redact ordinary words)."""
MIN_PARTIAL_CHARS = 6
"""A piece of a known secret this long at a cut is removed as well."""
ELLIPSIS = "…"
MAX_CUTS = 64
"""Ellipses looked at for a partial secret before them (the last ones; bounds the work)."""
CONTEXT_CHARS = 8192
"""How much of a stream's earlier text is kept for its next piece (a PEM key fits)."""
MAX_REMEMBERED = 4096
MAX_REMEMBERED_CHARS = 64
"""Texts this short (keys, names, ids) have their redaction remembered (at most
:data:`MAX_REMEMBERED` of them: then they are forgotten and remembered afresh)."""
STREAMED_FIELDS = frozenset({"deltaContent", "inputDelta", "partialOutput", "chunk"})
"""Event fields that carry a piece of a stream (a reply, a tool call's arguments, a tool's
output as it runs): a secret may be split across pieces."""
SECRET_ENV_NAMES = frozenset({CAPABILITY_ENV})
"""Variables whose values are secrets though their names do not say so (a team relay's
capability, domain/tool_servers.py): their values go wherever they are named."""
MAX_STREAMS = 16
"""Streams a :class:`StreamTails` keeps the end of (the most recent ones)."""

T = TypeVar("T")


class AgentLike(Protocol):
    """What the redactor reads of an agent config (its ``env`` and provider key name)."""

    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def provider(self) -> Any: ...


class Redactor:
    """Removes credentials from text and from records. Thread-safe."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._values: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self._remembered: dict[str, str] = {}
        self.generation = 0
        """Counts what it has learnt: a text redacted at one generation is redacted the same
        at that generation (a cache of redacted texts is good while it is unchanged)."""
        self.learn(secrets)

    # ---- what it knows ------------------------------------------------------------
    @property
    def known(self) -> int:
        """How many secret values it knows (for tests and diagnostics)."""
        return len(self._values)

    def learn(self, secrets: Iterable[str]) -> None:
        """Add secret values (shorter than :data:`MIN_SECRET_CHARS` are ignored)."""
        new = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_CHARS}
        with self._lock:
            if new <= self._values:
                return
            values = self._values | new
            ordered = sorted(values, key=len, reverse=True)  # longest first: no half replacements
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))
            self._values = frozenset(values)
            self._remembered = {}  # a new secret may be in a text already redacted
            self.generation += 1

    def learn_environment(self, environ: Mapping[str, str] | None = None) -> None:
        """Every secret-named variable of the environment (``*_TOKEN``, ``*_API_KEY`` …)."""
        env = os.environ if environ is None else environ
        self.learn(v for k, v in env.items() if is_secret_key(k))

    def learn_agents(self, agents: Iterable[AgentLike], environ: Mapping[str, str] | None = None) -> None:
        """The key each agent names with ``api_key_env``, and its ``env`` values that are
        named like a secret or look like a key."""
        env = os.environ if environ is None else environ
        found: list[str] = []
        for agent in agents:
            extra = dict(agent.env or {})
            provider = agent.provider
            name = getattr(provider, "api_key_env", None) if provider is not None else None
            if name:
                found.append(extra.get(name) or env.get(name, ""))
            found += [v for k, v in extra.items() if is_secret_key(k) or looks_like_key(v)]
        self.learn(found)

    # ---- applying it --------------------------------------------------------------
    def text(self, text: str) -> str:
        """``text`` without known secrets, secret shapes, or pieces of a secret before a "…"."""
        if not text:
            return text
        return _replace(text, self._spans(text, _ellipses(text), at_start=False))

    def fragment(self, text: str, before: str = "") -> str:
        """Like :meth:`text` for a piece cut out of something longer (a streamed delta, a
        draft, a slice of a long line): a secret's start at the end of the piece, its end
        at the start, or a piece that is all inside a secret, goes too. ``before`` is what
        came before the piece in the same stream: a secret that began there is found whole."""
        if not text:
            return text
        context = before[-CONTEXT_CHARS:]
        context = context[context_start(context) :]
        joined = context + text
        spans = self._spans(joined, [*_ellipses(joined), len(joined)], at_start=True)
        offset = len(context)
        clipped = [(max(s, offset) - offset, e - offset) for s, e in spans if e > offset]
        stripped = text.strip()
        if len(stripped) >= MIN_PARTIAL_CHARS and any(stripped in secret for secret in self._values):
            return REDACTED  # a middle piece of a secret streamed in several deltas
        return _replace(text, clipped)

    def cut(self, text: str, limit: int) -> str:
        """Redact, then cut to ``limit`` characters (never the other way round)."""
        text = self.text(text)
        return text if len(text) <= limit else text[: max(0, limit - 1)] + ELLIPSIS

    def scrub(self, value: T, pieces: Collection[str] = STREAMED_FIELDS, before: str = "") -> T:
        """A redacted copy of ``value``: every string in it, in dataclasses (every field),
        mappings, lists and tuples however nested. A value under a secret's name
        (``"apiKey": …``) goes whole; strings under a key in ``pieces`` are pieces of a
        stream (redacted as fragments that follow ``before``). Enums, numbers and other
        values are kept as they are."""
        return cast(T, self._scrub(value, pieces, before, None))

    def _scrub(
        self, value: Any, pieces: Collection[str], before: str, seen: list[str] | None, texts: _Texts | None = None
    ) -> Any:
        if isinstance(value, Enum):  # before str: a StrEnum is a str
            return value
        if isinstance(value, str):
            if len(value) <= MAX_REMEMBERED_CHARS:
                return self._short(value)
            if texts is None:
                return self.text(value)
            last, now = texts
            clean = now.get(value)
            if clean is None:
                clean = last.get(value)
                now[value] = self.text(value) if clean is None else clean
            return now[value]
        if isinstance(value, Mapping):
            named = _secret_entry(value)
            return {
                self._short(k): REDACTED
                if k == "value" and named
                else self._field(k, v, pieces, before, seen, True, texts)
                for k, v in value.items()
            }
        if is_dataclass(value) and not isinstance(value, type):
            clone = copy.copy(value)
            for f in fields(value):  # every field, init or not; frozen ones too
                old = getattr(value, f.name)
                object.__setattr__(clone, f.name, self._field(f.name, old, pieces, before, seen, False, texts))
            return clone
        if isinstance(value, tuple):
            items = [self._scrub(v, pieces, before, seen, texts) for v in value]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if isinstance(value, list):
            return [self._scrub(v, pieces, before, seen, texts) for v in value]
        return value

    def _short(self, text: Any) -> Any:
        """A short text redacted, remembered: keys and names repeat (``deltaContent``,
        ``toolCallId``, an event's type, a tool's name) in every event."""
        if not isinstance(text, str) or isinstance(text, Enum):
            return text
        memo = self._remembered  # learn() replaces it: what was redacted before lands in the old one
        clean = memo.get(text)
        if clean is None:
            clean = self.text(text)
            if len(memo) < MAX_REMEMBERED:
                memo[text] = clean
            else:
                self._remembered = {text: clean}
        return clean

    def _field(
        self,
        key: Any,
        value: Any,
        pieces: Collection[str],
        before: str,
        seen: list[str] | None,
        whole: bool,
        texts: _Texts | None,
    ) -> Any:
        if (
            isinstance(key, str)
            and (is_secret_key(key) or key in SECRET_ENV_NAMES)
            and value not in (None, "")
            and (whole or isinstance(value, str))
        ):
            return REDACTED
        if key in pieces and isinstance(value, str):
            if seen is not None:
                seen.append(value)
            return self.fragment(value, before)
        return self._scrub(value, pieces, before, seen, texts)

    # ---- where the secrets are ----------------------------------------------------
    def _spans(self, text: str, cuts: list[int], at_start: bool) -> list[Span]:
        found: list[Span] = []
        pattern = self._pattern
        if pattern is not None:
            found += [m.span() for m in pattern.finditer(text)]
        found += shape_spans(text)
        for cut in sorted(set(cuts))[-MAX_CUTS:]:
            found += self._cut_spans(text, cut)
        if at_start and self._values:
            found += self._known_end_at_start(text)
        return found

    def _cut_spans(self, text: str, cut: int) -> Iterator[Span]:
        """The start of a secret right before ``cut``: a known one, or one of a known shape."""
        for secret in self._values:
            for size in range(min(len(secret) - 1, cut), MIN_PARTIAL_CHARS - 1, -1):
                if text.startswith(secret[:size], cut - size):
                    yield cut - size, cut
                    break
        yield from cut_spans(text, cut, CONTEXT_CHARS)

    def _known_end_at_start(self, text: str) -> Iterator[Span]:
        """The end of a known secret at the very start (a piece that began inside one)."""
        for secret in self._values:
            for size in range(min(len(secret) - 1, len(text)), MIN_PARTIAL_CHARS - 1, -1):
                if text.startswith(secret[-size:]):
                    yield 0, size
                    break


def _secret_entry(value: Mapping[Any, Any]) -> bool:
    """A ``{"name": "GITHUB_TOKEN", "value": …}`` entry: how ACP passes env variables (a tool
    server's, a terminal's) and HTTP headers: its value is a secret when its name says so."""
    name = value.get("name")
    return (
        isinstance(name, str)
        and "value" in value
        and value["value"] not in (None, "")
        and (is_secret_key(name) or name in SECRET_ENV_NAMES)
    )


def _replace(text: str, spans: Iterable[Span]) -> str:
    """``text`` with each (merged) span replaced by :data:`REDACTED`."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if not merged:
        return text
    out: list[str] = []
    pos = 0
    for start, end in merged:
        out += [text[pos:start], REDACTED]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _ellipses(text: str) -> list[int]:
    """Where ``text`` was cut: before each "…", and before the spaces in front of one ("abc …")."""
    if ELLIPSIS not in text:
        return []
    cuts = []
    for match in re.finditer(ELLIPSIS, text):
        end = match.start()
        cuts.append(end)
        while end > 0 and text[end - 1] in " \t\n" and match.start() - end < 4:
            end -= 1
        cuts.append(end)
    return cuts


_Texts = tuple[dict[str, str], dict[str, str]]
"""A pass of :class:`RepeatedTexts`: the long texts its last pass redacted, and this pass's."""


class RepeatedTexts:
    """Long texts one writer saves again and again (the registry's queued prompts, at every
    save), each redacted once while the redactor learns nothing new: redacting a queue of
    1 MB prompts takes seconds, and each send to it saved them all again. Remembers only the
    texts of its last :meth:`scrub`: no more than that writer wrote last. Not thread-safe:
    one writer's state."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        self._redactor = redactor or REDACTOR
        self._last: dict[str, str] = {}
        self._generation = -1

    def scrub(self, value: T) -> T:
        """:meth:`Redactor.scrub` of ``value``, its long texts taken from the last pass when
        they were there and the redactor has learnt nothing since."""
        redactor = self._redactor
        generation = redactor.generation
        last = self._last if generation == self._generation else {}
        now: dict[str, str] = {}
        clean = redactor._scrub(value, STREAMED_FIELDS, "", None, (last, now))  # noqa: SLF001 - the redactor's own helper
        self._last, self._generation = now, generation
        return cast(T, clean)


class StreamTails:
    """What each stream (a session's reply, an agent's thoughts …) said last, so its next
    piece is redacted with the text before it: a URL whose password arrives in the next
    delta, or a key split in three, is found whole. Not thread-safe: one writer's state."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        self._redactor = redactor or REDACTOR
        self._tails: dict[Hashable, str] = {}

    def scrub(self, stream: Hashable, value: T, pieces: Collection[str] = STREAMED_FIELDS) -> T:
        """:meth:`Redactor.scrub` of ``value``, whose strings under ``pieces`` continue ``stream``."""
        before = self._tails.get(stream, "")
        seen: list[str] = []
        clean = self._redactor._scrub(value, pieces, before, seen)  # noqa: SLF001 - the redactor's own helper
        if seen:
            self._tails.pop(stream, None)  # the most recent last: the oldest goes first
            self._tails[stream] = (before + "".join(seen))[-CONTEXT_CHARS:]
            while len(self._tails) > MAX_STREAMS:
                del self._tails[next(iter(self._tails))]
        return cast(T, clean)


REDACTOR = Redactor()
"""The process's redactor: everything the app writes goes through it."""
REDACTOR.learn_environment()
