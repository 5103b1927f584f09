"""What a secret looks like when nobody said it was one: the shapes the redactor
(:mod:`polypilot_tui.infra.redact`) finds in any text.

- well-known token formats (GitHub, OpenAI, Anthropic, Stripe, Slack, AWS, Google, npm,
  GitLab, Hugging Face, PyPI, DigitalOcean, SendGrid, JWTs, age identities);
- the password of a URL (``scheme://user:password@host``; the user name stays), a user name
  shaped like a key (``https://<token>@host``), webhook URLs whose path is the secret;
- PEM private key blocks (the body between the header and the footer);
- values after a secret's name: ``DB_PASSWORD=…``, ``"apiKey": "…"``, ``password: …``,
  ``--token …``, ``Password=…;``/``AccountKey=…;`` (connection strings), ``mysql -p…``,
  ``docker login -p …``, ``curl -u user:…``,
  ``Authorization: Bearer …``; values that are code (``password=password``, a type, a
  call, a placeholder) are left alone;
- the start of any of these right before a cut ("…", the end of a streamed piece).

Every pattern is linear: possessive runs, bounded windows, no nested repetition (a hostile
agent's text must not stall the engine). Each is compiled on its first use (~11 ms of a start
that redacts nothing before its first frame), but the three that name a secret's variable:
the redactor learns the environment's secrets by them as it is imported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.patterns import compile_later

Span = tuple[int, int]
"""Where a secret is in a text: [start, end)."""

# ---- names: a variable or field whose value is a credential ------------------------------
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
# Compiled at import: the redactor reads the environment's names with them as it is imported.
_SECRET_SUFFIX = re.compile(r"[_\-.](?:key|token|secret|password|passwd|credentials?|pat)$", re.IGNORECASE)
_SECRET_SHOUTED = re.compile(r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$")
_SECRET_CAMEL = re.compile(r"[a-z0-9](?:Key|Token|Secret|Password|Credentials?)$")

# ---- values ----------------------------------------------------------------------------
# Well-known token formats: (literal start, body). The start alone, at a cut, is a partial.
_TOKENS = (
    (r"gh[pousr]_", r"[A-Za-z0-9]{20,}"),  # GitHub
    (r"github_pat_", r"[A-Za-z0-9_]{20,}"),
    (r"sk-", r"[A-Za-z0-9_-]{20,}"),  # OpenAI (sk-proj-, sk-svcacct-), Anthropic (sk-ant-), DeepSeek …
    (r"[rs]k_(?:live|test)_", r"[A-Za-z0-9]{16,}"),  # Stripe
    (r"whsec_", r"[A-Za-z0-9+/=]{20,}"),
    (r"xox[abposr]-", r"[A-Za-z0-9-]{10,}"),  # Slack
    (r"xapp-", r"[A-Za-z0-9-]{10,}"),
    (r"(?:AKIA|ASIA)", r"[0-9A-Z]{16}"),  # AWS access key ids
    (r"AIza", r"[0-9A-Za-z_-]{30,}"),  # Google API keys
    (r"ya29\.", r"[0-9A-Za-z_-]{20,}"),  # Google OAuth access tokens
    (r"GOCSPX-", r"[0-9A-Za-z_-]{20,}"),  # Google OAuth client secrets
    (r"npm_", r"[A-Za-z0-9]{30,}"),
    (r"gl(?:pat|dt|rt|ptt|cbt|soat)-", r"[0-9A-Za-z_-]{20,}"),  # GitLab
    (r"hf_", r"[A-Za-z0-9]{30,}"),  # Hugging Face
    (r"pypi-", r"[A-Za-z0-9_-]{50,}"),
    (r"dop_v1_", r"[a-f0-9]{64}"),  # DigitalOcean
    (r"SG\.", r"[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),  # SendGrid
    (r"eyJ", r"[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),  # JWT: header.payload.signature
    (r"AGE-SECRET-KEY-1", r"[0-9A-Z]{50,}"),  # age (file encryption) identities
)
_KNOWN_TOKENS = "|".join(start + body for start, body in _TOKENS)
_NOT_AFTER = r"(?<![A-Za-z0-9_])"
_KNOWN_SHAPE = compile_later(rf"(?:{_KNOWN_TOKENS})")
# A token's start right before a cut (AKIA/ASIA and SendGrid's SG. are ordinary words alone).
_TOKEN_START = compile_later(
    _NOT_AFTER
    + "(?:"
    + "|".join(start for start, _ in _TOKENS if start not in (r"(?:AKIA|ASIA)", r"SG\."))
    + r"|(?:AKIA|ASIA)[0-9A-Z]{4}|SG\.[A-Za-z0-9_-]{4})"
    + r"[A-Za-z0-9_.+/=-]*\Z"
)
_TOKEN_RUN = compile_later(r"[A-Za-z0-9_.+/=-]*")
"""Characters a token is made of (read backwards from a cut)."""

# The names a secret goes by, as a value's key: DB_PASSWORD, apiKey, SecretAccessKey, x-auth-token.
# The rules match any name (one possessive run: cheap) and keep those that end like a secret's.
_NAME = r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z0-9_.-]++)"
_SECRET_NAME_END = compile_later(
    r"(?:pass(?:word|wd|phrase)|secret|token|(?:api|access|account|private|master|signing|encryption)[_-]?key"
    r"|credentials?|auth|cookie)\Z",
    re.IGNORECASE,
)
_NAME_NEEDS = ("pass", "secret", "token", "key", "cred", "auth", "cookie")
_NOT_A_VALUE = compile_later(
    r"(?i:str|int|bool|bytes|float|none|null|nil|true|false|yes|no|optional|secretstr|string|number|boolean|any)\b"
    # a placeholder (${VAR}, $VAR, %{var}, {name}, {{ var }}, <token>) or a mask (****)
    r"|[$%]\{|\$[A-Z_][A-Z0-9_]*\b|\{\{|\{[A-Za-z_][A-Za-z0-9_.]*\}|<[A-Za-z_]|\*{3}|…|\.\.\."
)
_CLI_WITH_PASSWORD = r"(?:mysql|mysqldump|mysqladmin|mysqlsh|mariadb|mariadb-dump)"


@dataclass(frozen=True)
class _Rule:
    """A secret shape: ``pattern``'s group ``groups[i]`` (the first that matched) is the secret."""

    pattern: re.Pattern[str]
    groups: tuple[int | str, ...] = (0,)
    needs: frozenset[str] = frozenset()
    """Lower-case pieces (:func:`_triggers`) the text must hold one of for the rule to be
    tried (a fast skip)."""
    keep: Callable[[re.Match[str], str], bool] | None = None
    """Says whether a matched secret (the match, the secret) really is one (None: always)."""

    def spans(self, text: str) -> list[Span]:
        # One pass of finditer while every match is a secret (each is non-empty, so the next
        # search starts at its end, as finditer's does); a fresh one from inside a match that
        # is not. Hostile text makes a million matches: this loop is the redactor's cost.
        found: list[Span] = []
        add, keep, finditer = found.append, self.keep, self.pattern.finditer
        groups = [g if isinstance(g, int) else self.pattern.groupindex[g] for g in self.groups]
        pos = 0
        while True:
            for match in finditer(text, pos):
                regs = match.regs
                for group in groups:
                    start, end = regs[group]
                    if start >= 0:
                        break
                if end > start and (keep is None or keep(match, text[start:end])):
                    add((start, end))
                    continue
                # not a secret ("note: …"): what it took for a value may hold one ("… password: x")
                pos = start if start > match.start() else match.start() + 1
                break
            else:
                return found


def _named(match: re.Match[str], secret: str) -> bool:
    """The value of a name that ends like a secret's (``db_password``, ``apiKey``)."""
    return bool(_SECRET_NAME_END().search(match.group("name")))


def _not_code(match: re.Match[str], secret: str) -> bool:
    """Not a type, flag or placeholder, nor a variable of the secret's own name
    (``password=password``, ``self.token = token``: code, not a secret)."""
    if secret[:1] in "\"'":
        return True  # a quoted literal
    if _NOT_A_VALUE().match(secret):
        return False
    name = match.group("name").lower().lstrip("-")
    return secret.rsplit(".", 1)[-1].lower() != name.rsplit(".", 1)[-1]


def _is_value(match: re.Match[str], secret: str) -> bool:
    """The value of a secret's name (:func:`_named`) that is not code (:func:`_not_code`)."""
    return _named(match, secret) and _not_code(match, secret)


def _in_prose(match: re.Match[str], secret: str) -> bool:
    """A value after a secret's name in a sentence ("admin, password: hunter2"): one that could
    be a password, not a plain word ("the token: its own")."""
    return _is_value(match, secret) and (len(secret) >= 16 or not secret.isalpha())


def _not_a_port(match: re.Match[str], secret: str) -> bool:
    # A port has at most five digits: a longer run of digits is a password's start.
    return not (secret.isdigit() and len(secret) <= 5 and int(secret) <= 65535)


def _not_a_scheme(match: re.Match[str], secret: str) -> bool:
    return secret.lower() not in ("bearer", "basic", "token", "digest")


def _key_shaped(match: re.Match[str], secret: str) -> bool:
    return looks_like_key(secret)


def _rule(pattern: str, groups: tuple[int | str, ...] = ("v",), needs: tuple[str, ...] = (), **kw: Any) -> _Rule:
    return _Rule(re.compile(pattern, kw.pop("flags", 0)), groups, frozenset(needs), **kw)


_QUOTED = r"""(?:"(?P<dq>(?:[^"\\\n]|\\.)*+)"|'(?P<sq>[^'\n]*+)')"""
_UNQUOTED = r"(?P<v>[^\s\"'`&;,(){}\[\]<>]++)(?![(\[{])"  # not a call, an index or a placeholder


@cache
def _rules() -> tuple[_Rule, ...]:
    """The shapes of a whole secret (compiled on the first redaction)."""
    return (
        _rule(_NOT_AFTER + rf"(?:{_KNOWN_TOKENS})", (0,)),
        # KEY=value in shell commands and .env text (NAME_KEY, NAME_TOKEN …; the quotes go too)
        _rule(
            r"\b(?P<name>[A-Za-z][A-Za-z0-9_]*(?:_KEY|_TOKEN|_SECRET|_PASSWORD|_PASSWD|_PAT))[ \t]*[=:][ \t]*"
            r"(?P<v>\"[^\"]*\"|'[^']*'|[^\s\"'(\[]++(?![(\[]))",
            needs=("key", "token", "secret", "pass", "_pat"),
            keep=_not_code,
            flags=re.IGNORECASE,
        ),
        # a secret's name, then a value: "password": "…", api_key = '…', SecretAccessKey: "…" (quoted);
        # password=…, ?access_token=…&, --password=…, Password=…; (unquoted, after "=")
        _rule(
            _NAME + rf"[\"']?[ \t]*+(?:[=:][ \t]*+{_QUOTED}|=[ \t]*+(?![\"'=]){_UNQUOTED})",
            ("dq", "sq", "v"),
            _NAME_NEEDS,
            keep=_is_value,
        ),
        # name: value, unquoted: at the start of a line (YAML, HTTP headers) up to the next space,
        # elsewhere (prose: "admin, password: …", **Password**: …) up to a space or punctuation
        _rule(
            r"^[ \t>-]*+" + _NAME + r"[ \t]*+:[ \t]++(?P<v>[^\s#\"'][^\s]*+)",
            needs=_NAME_NEEDS,
            keep=_is_value,
            flags=re.MULTILINE,
        ),
        _rule(_NAME + r"[*_]{0,2}[ \t]*+:[*_]{0,2}[ \t]++" + _UNQUOTED, needs=_NAME_NEEDS, keep=_in_prose),
        # --password value, --api-key value …
        _rule(
            r"(?<![A-Za-z0-9_-])--(?P<name>[A-Za-z0-9_.-]++)[ \t]++(?P<v>[^\s-]\S*+)", needs=_NAME_NEEDS, keep=_is_value
        ),
        # ODBC: …;Pwd=value;
        _rule(r"(?i:;[ \t]*pwd[ \t]*=[ \t]*)(?P<v>[^;\s]++)", needs=("pwd",)),
        # mysql -psecret (attached: a separate word after -p is the database), sshpass -p secret
        _rule(rf"\b{_CLI_WITH_PASSWORD}\b[^\n|;&]{{0,120}}?[ \t]-p(?P<v>[^\s-]\S*+)", needs=("mysql", "mariadb")),
        _rule(r"\bsshpass[ \t]++-p[ \t]*+(?P<v>\S++)", needs=("pass",)),
        # docker login -u bot -p secret (podman, nerdctl, buildah, skopeo: the same option)
        _rule(
            r"\b(?:docker|podman|nerdctl|buildah|skopeo)\b[^\n|;&]{0,40}?\blogin\b"
            r"[^\n|;&]{0,120}?[ \t]-p[ \t]++(?P<v>[^\s-]\S*+)",
            needs=("login",),
        ),
        # curl -u user:password
        _rule(r"\bcurl\b[^\n|;&]{0,120}?[ \t](?:-u|--user)[ \t]*+[\"']?[^\s:\"']++:(?P<v>[^\s\"']++)", needs=("curl",)),
        # .netrc: machine host login user password secret
        _rule(r"\blogin[ \t]++\S++[ \t]++password[ \t]++(?P<v>\S++)", needs=("pass",)),
        # scheme://user:password@host (a password may hold ":" and "@": the last "@" ends it)
        _rule(r"://[^\s/?#@:'\"<>]*+:(?P<v>[^\s/?#'\"<>]+)@", needs=("://",)),
        # scheme://token@host (a user name shaped like a key)
        _rule(r"://(?P<v>[^\s/?#@:'\"<>]{16,})@", needs=("://",), keep=_key_shaped),
        # webhooks whose path is the secret
        _rule(r"hooks\.slack\.com/(?:services|workflows)/(?P<v>[A-Za-z0-9/_-]+)", needs=("hooks.slack",)),
        _rule(r"discord(?:app)?\.com/api/webhooks/(?P<v>[0-9]+/[A-Za-z0-9_-]+)", needs=("webhooks",)),
        # Authorization: Bearer …, Authorization: token …, bare Bearer tokens
        _rule(
            r"\bauthorization\s*[:=]\s*(?:(?:bearer|basic|token|digest)\s+)?(?P<v>[^\s\"',}]+)",
            needs=("auth",),
            flags=re.IGNORECASE,
        ),
        _rule(r"\bbearer\s+(?P<v>[A-Za-z0-9._~+/=-]{8,})", needs=("bearer",), flags=re.IGNORECASE),
    )


# PEM private keys: the body between the header and the footer; a key cut before its footer
# loses what follows its header (its base64 lines).
_PEM_BEGIN = compile_later(r"-----BEGIN [A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = compile_later(r"-----END [A-Z0-9 ]{0,40}?PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = compile_later(r"(?:[ \t]*+(?:\r?\n|(?:\\r)?\\n)[ \t]*+(?:(?!-----)[A-Za-z0-9+/=:, -])*+)*+")

# Secrets cut short at the end of a text (a "…" or the end of a streamed piece). Each is
# matched against the last few hundred characters before the cut.
_CUT_WINDOW = 256


@cache
def _cut_rules() -> tuple[_Rule, ...]:
    """The shapes of a secret's start right before a cut (compiled on first use)."""
    return (
        # scheme://user:pass… (not a port: http://host:80 at a cut is ordinary)
        _rule(r"://[^\s/?#@:'\"<>]*+:(?P<v>[^\s/?#@'\"<>]++)\Z", needs=("://",), keep=_not_a_port),
        # a secret's name, then an opening quote: password: "hunt…
        _rule(_NAME + r"[\"']?[ \t]*+[=:][ \t]*+[\"'](?P<v>[^\"'\n]++)\Z", needs=_NAME_NEEDS, keep=_named),
        # a secret's name, then a value unquoted: password: hunter… (a plain word whole is prose,
        # "the token: its own", but its start at a cut may be a longer password's)
        _rule(_NAME + r"[*_]{0,2}[ \t]*+:[*_]{0,2}[ \t]++" + _UNQUOTED + r"\Z", needs=_NAME_NEEDS, keep=_is_value),
        # Authorization: Bearer ab…
        _rule(
            r"\b(?:authorization\s*[:=]\s*|bearer\s+)(?:(?:bearer|basic|token)\s+)?(?P<v>[^\s\"',}]+)\Z",
            needs=("auth", "bearer"),
            keep=_not_a_scheme,
            flags=re.IGNORECASE,
        ),
    )


def is_secret_key(name: str) -> bool:
    """A variable or field name whose value is a credential (``GITHUB_TOKEN``, ``apiKey``)."""
    return name.lower() in _SECRET_NAMES or bool(
        _SECRET_SUFFIX.search(name) or _SECRET_SHOUTED.search(name) or _SECRET_CAMEL.search(name)
    )


_KEY_SHAPE = compile_later(r"[A-Za-z0-9_\-+/=.]{16,}")


def looks_like_key(value: str) -> bool:
    """A value shaped like a key: a known token format, or a long unbroken mix of letters
    and digits that is not a path."""
    if _KNOWN_SHAPE().fullmatch(value):
        return True
    return (
        bool(_KEY_SHAPE().fullmatch(value))
        and not value.startswith(("/", ".", "~"))
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


NEAR_CHARS = 256
"""How much of a stream's earlier text a piece is read with, at least: a secret that began
there (a URL, a ``NAME=``) is found whole. A token or a private key that began earlier is
read from its start."""


@cache
def _triggers() -> re.Pattern[str]:
    """Every rule's trigger, found in one pass (none contains another; two that can overlap in a
    text, "pas(s)ecret", "secre(t)oken", are both triggers of every rule that needs one of them)."""
    return re.compile("|".join(re.escape(n) for n in sorted({n for r in (*_rules(), *_cut_rules()) for n in r.needs})))


def _present(text: str) -> frozenset[str]:
    return frozenset(_triggers().findall(text.lower()))


def shape_spans(text: str) -> list[Span]:
    """Every secret :mod:`secret_shapes` knows in ``text``."""
    present = _present(text)
    found: list[Span] = []
    for rule in _rules():
        if not rule.needs or not rule.needs.isdisjoint(present):
            found += rule.spans(text)
    found += _pem_spans(text)
    return found


def cut_spans(text: str, cut: int, window: int) -> Iterator[Span]:
    """The start of a secret right before ``cut``: a token's (read back up to ``window``
    characters), a URL's password, a quoted value's, a bearer token's."""
    run_window = text[max(0, cut - window) : cut]
    run = len(_TOKEN_RUN().match(run_window[::-1]).group())  # type: ignore[union-attr]
    if run:
        tail = run_window[-run - 1 :] if run < len(run_window) else run_window
        token = _TOKEN_START().search(tail)
        if token is not None:
            yield cut - (len(tail) - token.start()), cut
    start = max(0, cut - _CUT_WINDOW)
    piece = text[start:cut]
    present = _present(piece)
    for rule in _cut_rules():
        if not rule.needs.isdisjoint(present):
            yield from ((s + start, e + start) for s, e in rule.spans(piece))


def context_start(before: str) -> int:
    """Where in ``before`` (the text before a piece) to start reading it: the last
    :data:`NEAR_CHARS`, from the start of a token run that crosses them, or of a private key
    that has not ended yet."""
    start = max(0, len(before) - NEAR_CHARS)
    if start:
        start -= len(_TOKEN_RUN().match(before[:start][::-1]).group())  # type: ignore[union-attr]
        pem = before.rfind("-----BEGIN ")
        if 0 <= pem < start and "-----END " not in before[pem:]:
            start = pem
    return start


def _pem_spans(text: str) -> Iterator[Span]:
    """The bodies of PEM private keys (a key without its footer: the base64 lines after its header)."""
    if "PRIVATE KEY" not in text:
        return
    pos, ended = 0, True
    while begin := _PEM_BEGIN().search(text, pos):
        end = _PEM_END().search(text, begin.end()) if ended else None
        if end is not None:
            yield begin.end(), end.start()
            pos = end.end()
            continue
        ended = False  # no footer after this header: none after later ones either
        body = _PEM_BODY().match(text, begin.end())
        stop = body.end() if body is not None else begin.end()
        if stop > begin.end():
            yield begin.end(), stop
        pos = max(stop, begin.end())
