"""The redactor: one place that knows every secret the app knows, applied before anything
is written (logs and their tracebacks, recordings, the registry, history, transcripts,
agent stderr logs, ``status``).

It removes two kinds of secret:

- **known values**: the values of secret-named environment variables, the keys agents name
  with ``api_key_env``, and every agent ``env`` value that is named like a secret or looks
  like a key. Fed once at start (:meth:`Redactor.learn_environment`,
  :meth:`Redactor.learn_agents`); the process shares one instance, :data:`REDACTOR`.
- **shapes**: ``NAME_KEY=value``, ``Authorization: Bearer …``, and well-known token formats
  (``ghp_…``, ``sk-…``, ``AKIA…``) even when the value was never seen.

Text that was cut before it got here ("…" previews, pieces of a long stderr line) may hold
only the start or the end of a secret: those partial values are removed too, so a cut can
never leak a key's prefix.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
"""Shorter values are not treated as secrets (they would redact ordinary words)."""
MIN_PARTIAL_CHARS = 6
"""A piece of a known secret this long at a cut is removed as well."""
ELLIPSIS = "…"
STREAMED_FIELDS = frozenset({"deltaContent"})
"""Event fields that carry a piece of a streamed reply (a key may be split across pieces)."""

_SECRET_NAMES = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "password",
        "passwd",
        "secret",
        "token",
        "apikey",
        "api_key",
        "api-key",
        "x-api-key",
        "access_token",
        "refresh_token",
        "id_token",
        "client_secret",
        "private_key",
        "bearer",
    }
)
# ENV_VAR style (GITHUB_TOKEN, OPENAI_API_KEY, my-secret), SHOUTED (APIKEY) and camelCase (apiKey).
_SECRET_SUFFIX = re.compile(r"[_\-.](?:key|token|secret|password|passwd|credentials?|pat)$", re.IGNORECASE)
_SECRET_SHOUTED = re.compile(r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$")
_SECRET_CAMEL = re.compile(r"[a-z0-9](?:Key|Token|Secret|Password|Credentials?)$")
_KNOWN_TOKENS = (
    r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}"
)
_TEXT_PATTERNS = (
    # KEY=value in shell commands and .env text
    (
        re.compile(
            r"\b([A-Za-z][A-Za-z0-9_]*(?:_KEY|_TOKEN|_SECRET|_PASSWORD|_PASSWD|_PAT))(\s*[=:]\s*)"
            r"(\"[^\"]*\"|'[^']*'|[^\s\"']+)",
            re.IGNORECASE,
        ),
        rf"\1\2{REDACTED}",
    ),
    (
        re.compile(r"\b(authorization\s*[:=]\s*)(?:(bearer|basic|token)\s+)?[^\s\"',}]+", re.IGNORECASE),
        rf"\1\2 {REDACTED}",
    ),
    (re.compile(r"\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE), rf"\1{REDACTED}"),
    (re.compile(rf"\b(?:{_KNOWN_TOKENS})\b"), REDACTED),
)
_KEY_SHAPE = re.compile(r"[A-Za-z0-9_\-+/=.]{16,}")
_KNOWN_SHAPE = re.compile(rf"(?:{_KNOWN_TOKENS})")


def is_secret_key(name: str) -> bool:
    """A variable or field name whose value is a credential (``GITHUB_TOKEN``, ``apiKey``)."""
    return name.lower() in _SECRET_NAMES or bool(
        _SECRET_SUFFIX.search(name) or _SECRET_SHOUTED.search(name) or _SECRET_CAMEL.search(name)
    )


def looks_like_key(value: str) -> bool:
    """A value shaped like a key: a known token format, or a long unbroken mix of letters
    and digits that is not a path."""
    if _KNOWN_SHAPE.fullmatch(value):
        return True
    return (
        bool(_KEY_SHAPE.fullmatch(value))
        and not value.startswith(("/", ".", "~"))
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


class AgentLike(Protocol):
    """What the redactor reads of an agent config (its ``env`` and provider key name)."""

    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def provider(self) -> Any: ...


class Redactor:
    """Removes credentials from text and JSON-like data. Thread-safe."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._values: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
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
        pattern = self._pattern
        if pattern is not None:
            text = pattern.sub(REDACTED, text)
            if ELLIPSIS in text:
                text = self._partials(text, _ellipses(text), at_start=False)
        for shape, replacement in _TEXT_PATTERNS:
            text = shape.sub(replacement, text)
        return text

    def fragment(self, text: str) -> str:
        """Like :meth:`text` for a piece cut out of something longer (a streamed delta, a
        draft, a slice of a long line): a secret's start at the end of the piece, its end
        at the start, or a piece that is all inside a secret, goes too."""
        text = self.text(text)
        if self._pattern is None or not text:
            return text
        if len(text.strip()) >= MIN_PARTIAL_CHARS and any(text.strip() in secret for secret in self._values):
            return REDACTED  # a middle piece of a secret streamed in several deltas
        return self._partials(text, [*_ellipses(text), len(text)], at_start=True)

    def cut(self, text: str, limit: int) -> str:
        """Redact, then cut to ``limit`` characters (never the other way round)."""
        text = self.text(text)
        return text if len(text) <= limit else text[: max(0, limit - 1)] + ELLIPSIS

    def value(self, value: Any, pieces: Collection[str] = STREAMED_FIELDS) -> Any:
        """A redacted copy of JSON-like data (mappings, lists, strings); strings under a key
        in ``pieces`` are pieces of a stream and redacted as fragments."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {
                k: (
                    REDACTED
                    if isinstance(k, str) and is_secret_key(k) and v not in (None, "")
                    else self.fragment(v)
                    if k in pieces and isinstance(v, str)
                    else self.value(v, pieces)
                )
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self.value(v, pieces) for v in value]
        return value

    def _partials(self, text: str, cuts: list[int], at_start: bool) -> str:
        """Remove the start of a known secret right before each cut, and, when ``at_start``,
        the end of one at the very beginning."""
        values = self._values
        for end in sorted(set(cuts), reverse=True):  # from the back: earlier indices stay valid
            longest = 0
            for secret in values:
                for size in range(min(len(secret) - 1, end), MIN_PARTIAL_CHARS - 1, -1):
                    if size > longest and text.startswith(secret[:size], end - size):
                        longest = size
                        break
            if longest:
                text = text[: end - longest] + REDACTED + text[end:]
        if at_start:
            longest = 0
            for secret in values:
                for size in range(min(len(secret) - 1, len(text)), MIN_PARTIAL_CHARS - 1, -1):
                    if size > longest and text.startswith(secret[-size:]):
                        longest = size
                        break
            if longest:
                text = REDACTED + text[longest:]
        return text


def _ellipses(text: str) -> list[int]:
    return [m.start() for m in re.finditer(ELLIPSIS, text)]


REDACTOR = Redactor()
"""The process's redactor: everything the app writes goes through it."""
REDACTOR.learn_environment()
