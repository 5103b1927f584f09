"""Named failure states: why an agent cannot work, and the fix in words.

A failed turn, a lost connection or an agent that cannot start says so in the agent's own
words ("Authentication failed with provider … (HTTP 401)", "Internal error: You exceeded
your current quota …", "fetch failed"). :func:`classify` recognises the class of such a
text — an HTTP status code when the text carries one, then the words agents use — and
names it with a fix a person can act on. Texts of no known class stay unnamed (None): the
status reads "error" with the text as it was.
"""

from __future__ import annotations

import re
from enum import StrEnum

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.patterns import CompiledLater, compile_later


class FailureKind(StrEnum):
    """The failure states a user can act on."""

    NEEDS_SIGN_IN = "needs-sign-in"
    RATE_LIMITED = "rate-limited"
    MODEL_UNAVAILABLE = "model-unavailable"
    SERVER_UNREACHABLE = "server-unreachable"
    NOT_INSTALLED = "not-installed"
    EXITED_AT_START = "exited-at-start"
    SANDBOX_UNAVAILABLE = "sandbox-unavailable"


@dataclass(frozen=True)
class Failure:
    """A named failure: its kind, a short title, the fix in words and the original text."""

    kind: FailureKind
    title: str
    """A few words for the sidebar ("needs sign-in")."""
    fix: str
    """What to do about it, in words."""
    detail: str
    """The agent's own text, verbatim."""

    def to_json(self) -> dict[str, str]:
        """What ``status --json`` says of it (the detail is the view's reason already)."""
        return {"kind": self.kind.value, "title": self.title, "fix": self.fix}


TITLES: dict[FailureKind, str] = {
    FailureKind.NEEDS_SIGN_IN: "needs sign-in",
    FailureKind.RATE_LIMITED: "rate-limited",
    FailureKind.MODEL_UNAVAILABLE: "model unavailable",
    FailureKind.SERVER_UNREACHABLE: "model server unreachable",
    FailureKind.NOT_INSTALLED: "agent not installed",
    FailureKind.EXITED_AT_START: "agent exited at start",
    FailureKind.SANDBOX_UNAVAILABLE: "sandbox cannot start",
}

_GENERIC_SIGN_IN = "sign in with the agent's own login command"
_KEY_HINT = "or check the API key its provider uses (the key variable named in agents.toml)"

FIXES: dict[FailureKind, str] = {
    FailureKind.RATE_LIMITED: (
        "wait a minute and send again; if it keeps happening the account's quota or billing "
        "needs attention, or pick another model"
    ),
    FailureKind.MODEL_UNAVAILABLE: (
        "pick a model this provider serves (set `model` in agents.toml, or start a new session with another)"
    ),
    FailureKind.SERVER_UNREACHABLE: (
        "check that the model server is running and that its address (the provider base_url) is right, then send again"
    ),
    FailureKind.NOT_INSTALLED: (
        "install the agent or make its command executable (`polypilot agents` says what is wrong), "
        "or set its `command` in agents.toml"
    ),
    FailureKind.EXITED_AT_START: "read its last stderr lines (F2 shows its logs), fix what they name, then send again",
    FailureKind.SANDBOX_UNAVAILABLE: "make bubblewrap work here as docs/sandbox.md says, then ctrl+r",
}

#: The words polypilot puts before why a session's sandbox cannot start (the session refused,
#: never run unsandboxed); what follows says why and how to fix it.
_SANDBOX = compile_later(r"(?:sandbox cannot start|cannot run sandboxed here):\s*(?P<why>.*)", re.I | re.S)

# Words agents use, in the order they are tried: the more specific classes first (a
# "model not found" text also says "not found"; a text that names a missing command may
# also say "could not start"; a sandbox that cannot start says "bwrap is not installed", and
# the agent is installed). Each is compiled when it is first tried: compiled at import, they
# were ~5 ms of every start.
_WORDS: tuple[tuple[FailureKind, CompiledLater], ...] = (
    (FailureKind.SANDBOX_UNAVAILABLE, _SANDBOX),
    (
        FailureKind.MODEL_UNAVAILABLE,
        compile_later(
            r"model[_ ]not[_ ]found|unknown model|model .{0,80}(does not exist|not supported|is not available|"
            r"not available|unavailable)|(unsupported|invalid) model|model_not_supported|no such model|"
            r"check the base url and model name",
            re.I,
        ),
    ),
    (
        FailureKind.NOT_INSTALLED,
        compile_later(
            r"command not found|is not found|cli not found|not found at |not found \(or not executable\)|"
            r"is not executable|is a folder, not a program|"
            r"\[errno 2\] no such file or directory|not installed|spawn \S+ enoent|"
            r"executable file not found",
            re.I,
        ),
    ),
    (
        FailureKind.RATE_LIMITED,
        compile_later(
            r"rate[ _-]?limit|too many requests|quota (exceeded|reached)|exceeded .{0,30}quota|out of quota|"
            r"insufficient_quota|resource[_ ]exhausted|usage limit|exceeded your",
            re.I,
        ),
    ),
    (
        FailureKind.NEEDS_SIGN_IN,
        compile_later(
            r"unauthori[sz]ed|authentication (failed|error|required)|not authenticated|invalid[_ ]api[_ ]key|"
            r"incorrect api key|"
            r"api key .{0,40}(missing|invalid|not set)|missing api key|no api key|not logged in|"
            r"please (log|sign) ?in|login required|(sign|log)[ -]in (is )?required|"
            r"key variable .{0,80} not set|permission_denied|access denied|invalid (token|credentials)|"
            r"token (has )?expired|no (github )?(oauth )?token|hmac key|not signed in|no sign-in found",
            re.I,
        ),
    ),
    (
        FailureKind.SERVER_UNREACHABLE,
        compile_later(
            r"econnrefused|connection refused|econnreset|connection reset|enotfound|eai_again|"
            r"getaddrinfo|name or service not known|fetch failed|failed to fetch|unable to connect|"
            r"could not connect to|couldn't connect|connect error|error sending request|etimedout|"
            r"connect(ion)? timed out|connection error|network error|server unreachable|stream disconnected|"
            r"ehostunreach|enetunreach|socket hang up",
            re.I,
        ),
    ),
    (
        FailureKind.EXITED_AT_START,
        compile_later(
            r"exited (before|during) (initiali[sz]e|start|session)|process exited|\bexited\b.{0,40}(code|signal)|"
            r"died|crashed",
            re.I,
        ),
    ),
)

_STATUS = compile_later(
    r"(?:\bHTTP[ /]?(?:\d(?:\.\d)?\s+)?|\bstatus(?:[ _]?code)?\s*[:=]?\s*|\bstatusCode\W{0,3}|\berror:?\s+)"
    r"(401|403|404|429)\b",
    re.I,
)
#: Reasons polypilot writes when an agent does not start: only these can name a missing
#: command or an agent that died at start (a turn's "file is not found" names neither).
_STARTING = compile_later(
    r"could not start the agent|cannot start here|cannot start ACP agent|sandbox cannot start|cannot run sandboxed",
    re.I,
)
_START_KINDS = frozenset({FailureKind.NOT_INSTALLED, FailureKind.EXITED_AT_START, FailureKind.SANDBOX_UNAVAILABLE})
_STATUS_KINDS = {
    401: FailureKind.NEEDS_SIGN_IN,
    403: FailureKind.NEEDS_SIGN_IN,
    404: FailureKind.MODEL_UNAVAILABLE,
    429: FailureKind.RATE_LIMITED,
}


def status_code(text: str) -> int | None:
    """The HTTP status code a failure text names (``(HTTP 401)``, ``Last error: 429 …``), if any."""
    match = _STATUS().search(text)
    return int(match.group(1)) if match else None


def kind_of(text: str, status: int | None = None) -> FailureKind | None:
    """The class of a failure text (and of the status code the agent gave), or None."""
    starting = _STARTING().search(text) is not None
    words = next(
        (kind for kind, pattern in _WORDS if (starting or kind not in _START_KINDS) and pattern().search(text)), None
    )
    # Words that name the class outrank a bare code: a 404 whose text says "rate limit"
    # is a rate limit, and a 403 that says "quota" is a quota.
    if words is not None and words is not FailureKind.EXITED_AT_START:
        return words
    code = status if status is not None else status_code(text)
    if code in _STATUS_KINDS:
        return _STATUS_KINDS[code]
    return words


def sign_in_fix(sign_in: str) -> str:
    """The fix for a refused sign-in: the agent's own way (its catalog entry's ``sign_in``), else
    the generic one."""
    return sign_in.strip() or f"{_GENERIC_SIGN_IN}, {_KEY_HINT}"


def classify(text: str, sign_in: str = "", status: int | None = None) -> Failure | None:
    """Name the failure ``text`` describes (None for a text of no known class).

    ``sign_in`` is how the agent is signed in (the fix for a refused sign-in); ``status`` is a
    status code the agent gave apart from its text.
    """
    if not text.strip() and status is None:
        return None
    kind = kind_of(text, status)
    if kind is None:
        return None
    if kind is FailureKind.NEEDS_SIGN_IN:
        fix = sign_in_fix(sign_in)
    elif kind is FailureKind.SANDBOX_UNAVAILABLE and (said := _sandbox_fix(text)):
        fix = said
    else:
        fix = FIXES[kind]
    return Failure(kind, TITLES[kind], fix, text)


def failure_text(reason: str, sign_in: str = "", detail: str = "") -> str:
    """A failed turn's chat row: the failure's title, the agent's words, then the fix (the words
    alone when the failure has no name). ``detail`` is the turn's technical why ("HTTP 401")."""
    failure = classify(reason, sign_in, status_code(detail) if detail else None)
    if failure is None:
        return reason
    return f"{failure.title.capitalize()} — {reason}\nFix: {failure.fix}"


def _sandbox_fix(text: str) -> str:
    """Why the sandbox cannot start and how to fix it, in the reason's own words."""
    match = _SANDBOX().search(text)
    return " ".join(match.group("why").split()) if match else ""
