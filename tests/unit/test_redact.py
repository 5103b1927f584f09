"""The one redactor (infra/redact.py): what it learns, the shapes it knows without learning,
what a cut or a stream can no longer leak, and records redacted whole."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from polypilot_tui.config import AgentConfig, ProviderConfig
from polypilot_tui.domain.text import one_line
from polypilot_tui.infra.redact import (
    REDACTED,
    REDACTOR,
    Redactor,
    RepeatedTexts,
    StreamTails,
    is_secret_key,
    looks_like_key,
)
from polypilot_tui.storage.registry import Registry, SessionRecord

KEY = "Zq8xKpL2mN4vB7cD9fGhJ3kL5pQ"


def test_it_learns_every_source_the_app_knows_of() -> None:
    redactor = Redactor()
    redactor.learn_environment({"MY_SERVICE_TOKEN": "env-token-0123456789", "HOME": "/root", "SHORT_KEY": "abc"})
    redactor.learn_agents(
        [
            AgentConfig(
                name="x",
                kind="acp",
                command="x",
                env={"DEPLOY_TOKEN": "named-like-a-token-42", "PLAIN": KEY, "PATH_ISH": "/usr/local/bin/x86_64"},
                provider=ProviderConfig(base_url="http://h/v1", api_key_env="LLM_ACCESS"),
            )
        ],
        environ={"LLM_ACCESS": "plain-name-provider-key-7"},
    )
    text = "env-token-0123456789 named-like-a-token-42 plain-name-provider-key-7 " + KEY
    assert redactor.text(text) == " ".join([REDACTED] * 4)
    assert redactor.known == 4  # not HOME, not the 3-character key, not the path
    assert redactor.text("/usr/local/bin/x86_64 and /root") == "/usr/local/bin/x86_64 and /root"


@pytest.mark.parametrize("limit", range(20, 60))
def test_a_reason_cut_anywhere_through_a_key_leaks_no_piece_of_it(limit: int) -> None:
    redactor = Redactor([KEY])
    reason = "agent error: auth failed with " + KEY + " and more"
    cut = one_line(reason, limit)  # the engine cuts reasons before anyone redacts them
    clean = redactor.text(cut)
    assert not any(KEY[:n] in clean for n in range(6, len(KEY) + 1)), clean


def test_the_registry_stores_a_cut_reason_without_the_cut_key(tmp_path: Path) -> None:
    REDACTOR.learn([KEY])  # the registry uses the process's redactor
    reason = one_line("could not start the agent: provider said " + KEY, 50)
    assert KEY[:8] in reason  # really cut through the key
    Registry(tmp_path).save([SessionRecord("s", "n", "demo", reason=reason)], time.time())
    text = (tmp_path / "sessions.json").read_text()
    assert KEY[:6] not in text and REDACTED in text


def test_pieces_of_a_streamed_key_are_removed_from_deltas() -> None:
    redactor = Redactor([KEY])
    start, middle, end = KEY[:9], KEY[9:18], KEY[18:]
    assert redactor.fragment("here it is: " + start) == "here it is: " + REDACTED
    assert redactor.fragment(middle) == REDACTED
    assert redactor.fragment(end + " done") == REDACTED + " done"
    assert redactor.scrub({"deltaContent": middle, "toolName": "bash"}) == {
        "deltaContent": REDACTED,
        "toolName": "bash",
    }
    assert redactor.fragment("ordinary words") == "ordinary words"


def test_redact_then_cut_never_the_other_way_round() -> None:
    redactor = Redactor([KEY])
    assert redactor.cut("x" * 30 + KEY, 40) == "x" * 30 + REDACTED
    assert KEY[:5] not in redactor.cut("key " + KEY, 12)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GITHUB_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("apiKey", True),
        ("APIKEY", True),
        ("x-api-key", True),
        ("MY_PAT", True),
        ("tokenLimit", False),
        ("monkey", False),
        ("keyboard", False),
        ("PATH", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_key(name) is secret


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("sk-proj-abcdefghijklmnopqrstuvwx", True),
        ("ghp_" + "a" * 36, True),
        (KEY, True),
        ("/home/user/projects/x86_64", False),
        ("1", False),
        ("OPENCODE_DISABLE_AUTOUPDATE", False),
        ("just some words here", False),
    ],
)
def test_values_shaped_like_keys(value: str, key: bool) -> None:
    assert looks_like_key(value) is key


def test_a_repeated_failure_is_logged_once_in_full_then_counted(tmp_path) -> None:
    """An agent whose every update fails the SDK's schema must not flood the log."""
    import logging

    from polypilot_tui.infra.logs import setup_file_logging

    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    path = setup_file_logging(tmp_path, "test.log")
    assert path is not None
    log = logging.getLogger("acp.test")
    try:
        for _ in range(250):
            try:
                raise ValueError("1 validation error for SessionNotification\nupdate.usage_update.used")
            except ValueError:
                log.exception("Unhandled error while handling notification method=%s", "session/update")
        try:
            raise KeyError("another failure")
        except KeyError:
            log.exception("something else")
    finally:
        for handler in list(root.handlers):
            handler.flush()
            if handler not in before:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(level)
    text = path.read_text()
    assert text.count("Traceback") == 2  # the first of each failure, in full
    assert "(the same failure 100 times so far)" in text and "(the same failure 200 times so far)" in text
    assert text.count("Unhandled error while handling notification") == 3


def test_a_line_logged_with_exc_info_false_is_written_not_an_error() -> None:
    """The Copilot SDK logs its timings with ``exc_info=False``; at debug level (``--log-file``)
    that must not raise inside the filter (it failed the CLI start)."""
    import logging

    from polypilot_tui.infra.logs import RepeatFilter

    record = logging.getLogger("copilot.client").makeRecord(
        "copilot.client", logging.DEBUG, __file__, 1, "subprocess spawned", (), False
    )
    assert RepeatFilter().filter(record) is True


# ---- shapes: secrets the redactor was never told ------------------------------------------
PW = "Tr0ub4dor-3xq9Zk"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
B64_KEY = "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4QQ=="
AGE_KEY = "AGE-SECRET-KEY-1" + "QYZ3RSX8GF2TVDW0S3JN54KHCE6MUA7LQYZ3RSX8GF2TVDW0S3JN54KHCE"
PEM_BODY = "MIIEowIBAAKCAQEAx4Ub1tYhz3GQ9vWzK\nQ8mN2pL5rT7vX9zB1dF3hJ5kL7nP9rT1v\nX3zB5dF7hJ9kL1nP3rT5vX7zB9dF1hJ=="
ESCAPED_PEM_BODY = PEM_BODY.replace("\n", "\\n")
# (text, the secret in it): each case removes the secret and keeps the rest readable.
SHAPES = [
    (f"postgres://app:{PW}@db.internal:5432/prod", PW),
    (f"mysql://root:{PW}@127.0.0.1/x", PW),
    (f"redis://:{PW}@cache:6379/0", PW),
    (f"https://ci:{PW}@github.com/org/repo.git", PW),
    (f"mongodb+srv://admin:p@ss:{PW}@cluster0.example.net/db", f"p@ss:{PW}"),  # the last "@" ends it
    ("https://0123456789abcdef0123456789abcdef01234567@github.com/o/r", "0123456789abcdef0123456789abcdef01234567"),
    (f"token {JWT} expires", JWT),
    (f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----", PEM_BODY),
    (f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----", PEM_BODY),
    ("-----BEGIN PRIVATE KEY-----\\n" + ESCAPED_PEM_BODY + "\\n-----END PRIVATE KEY-----", "x4Ub1tYhz3"),  # a repr
    ("sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    ("sk-ant-api03-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z-AA", "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    ("ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123", "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijkLMNOP", "11ABCDEFG0123456789_abcdefghijk"),
    ("xoxb-1234567890-0987654321-Ab3dEf6hIj9kLm2n", "1234567890-0987654321"),
    ("sk_live_Ab3dEf6hIj9kLm2nOp5q", "Ab3dEf6hIj9kLm2nOp5q"),
    ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("AIzaSyAb3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "SyAb3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    ("ya29.a0Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "a0Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    ("npm_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123", "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    ("glpat-Ab3dEf6hIj9kLm2nOp5q", "Ab3dEf6hIj9kLm2nOp5q"),
    ("hf_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0", "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    ("https://hooks.slack.com/services/T0000/B0000/Ab3dEf6hIj9kLm2nOp5q", "Ab3dEf6hIj9kLm2nOp5q"),
    (f"aws_secret_access_key = {PW}", PW),
    (f"export AWS_SECRET_ACCESS_KEY={PW}", PW),
    (f'{{"AccessKeyId": "AKIA", "SecretAccessKey": "{PW}", "SessionToken": "{PW}x"}}', PW),
    (f"host=db user=app password={PW} dbname=x", PW),
    (f"Server=db;Database=app;User Id=sa;Password={PW};", PW),
    (f"Driver={{ODBC}};Uid=sa;Pwd={PW};", PW),
    (f"jdbc:mysql://db/app?user=app&password={PW}&ssl=true", PW),
    (f"mysql -u root -p{PW} app", PW),
    (f"sshpass -p {PW} ssh deploy@host", PW),
    (f"curl -u alice:{PW} https://api.example.com", PW),
    (f"app --password {PW} --verbose", PW),
    (f"app --password={PW}", PW),
    (f"deploy --api-key {PW}", PW),
    (f"password: {PW}\nuser: bob", PW),
    (f"  db_password: {PW}", PW),
    (f"The admin account is admin, password: {PW}.", PW),
    (f'client_secret = "{PW}"', PW),
    (f"X-Api-Key: {PW}", PW),
    (f"machine api.example.com login bob password {PW}", PW),
    (f"Authorization: Bearer {PW}", PW),
    (f"Authorization: token {PW}", PW),
    (f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={B64_KEY};EndpointSuffix=core.windows.net", B64_KEY),
    (f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={B64_KEY}", B64_KEY),
    (f'{{"masterKey": "{PW}", "signing_key": "{PW}x"}}', PW),
    (f"# created: 2024\n{AGE_KEY}\n", AGE_KEY[16:]),
    (f"docker login -u bot -p {PW} registry.example.com", PW),
    (f"echo x | podman login --username bot -p {PW} quay.io", PW),
]


@pytest.mark.parametrize(("text", "secret"), SHAPES, ids=[t[:28] for t, _ in SHAPES])
def test_a_secret_given_away_by_its_shape_is_removed(text: str, secret: str) -> None:
    clean = Redactor().text(text)
    assert not pieces_in(secret, clean), clean
    assert REDACTED in clean


def test_what_surrounds_a_secret_stays_readable() -> None:
    redactor = Redactor()
    assert redactor.text(f"postgres://app:{PW}@db:5432/x") == f"postgres://app:{REDACTED}@db:5432/x"  # the user stays
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\nafter"
    assert redactor.text(pem) == f"-----BEGIN RSA PRIVATE KEY-----{REDACTED}-----END RSA PRIVATE KEY-----\nafter"
    assert redactor.text(f"Authorization: Bearer {PW}") == f"Authorization: Bearer {REDACTED}"
    assert redactor.text(f'"password": "{PW}", "user": "bob"') == f'"password": "{REDACTED}", "user": "bob"'


NOT_SECRETS = [
    "commit 3f2a9c1b8e7d6f5a4b3c2d1e0f9a8b7c6d5e4f3a\nAuthor: Ann <ann@example.com>\nMerge: 3f2a9c1 8e7d6f5",
    "HEAD is now at 9fceb02d0ae598e95dc970b74767f19372d61af8 Fix the parser",
    "/home/user/projects/x86_64/sk-learn/build/lib.linux-x86_64-3.11/module.so",
    "ssh://git@github.com:22/org/repo.git and git@github.com:org/repo.git",
    "http://[::1]:8080/health http://localhost:8080/a@b https://example.com:443/path?q=1",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    '"integrity": "sha512-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z0123456789=="',
    "id 550e8400-e29b-41d4-a716-446655440000 and base64 eyJhbGciOiJIUzI1NiJ9 alone",
    "max_tokens=4096 tokens: 12 token_count=5 input_tokens: 300",
    "def login(username: str, password: str) -> Token:\n    password: str\n    token: Optional[str] = None",
    "connect(host=h, password=password, token=self.token)\nself.token = token",
    "if password == other:\n    missing_key = agent.missing_key(env)\n    if missing_key:\n        return None",
    "token = tokens[index]; set_cookie = headers['Set-Cookie']",
    "password: ${DB_PASSWORD}\napi_key: <your key here>\nsecret: '{{ vault_secret }}'\ntoken: ****",
    "The theme's style for a token: its own, else its parent's.",
    "mysql -u root -p app  # -p alone: asks for the password",
    "PWD=/home/user/projects OLDPWD=/tmp",
    "see ?token=… in the address bar",
    "task-1234567890abcdefghij risk-assessment-for-the-whole-project",
]


@pytest.mark.parametrize("text", NOT_SECRETS, ids=[t[:24] for t in NOT_SECRETS])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor(["Zq8xKpL2mN4vB7cD9fGhJ3kL5pQ"]).text(text) == text


def pieces_in(secret: str, text: str, size: int = 6) -> list[str]:
    """The runs of ``size`` characters of ``secret`` (of each of its lines) found in ``text``."""
    runs = {line[i : i + size] for line in secret.splitlines() for i in range(max(1, len(line) - size + 1))}
    return sorted(run for run in runs if len(run) == size and run in text)


WHOLE_ONLY = {
    "https://0123456789abcdef0123456789abcdef01234567@github.com/o/r",  # a user name is a key only before "@"
    f"mongodb+srv://admin:p@ss:{PW}@cluster0.example.net/db",  # an "@" in a password: which "@" ends it?
}
"""Secrets found whole, but not from a piece of them."""
CUT_SHAPES = [(text, secret) for text, secret in SHAPES if text not in WHOLE_ONLY]


def _cuts(text: str, secret: str) -> range:
    at = text.index(secret.splitlines()[0])
    return range(at + 1, at + len(secret))


@pytest.mark.parametrize(("text", "secret"), CUT_SHAPES, ids=[t[:28] for t, _ in CUT_SHAPES])
def test_a_secret_cut_anywhere_leaves_no_piece_before_the_cut(text: str, secret: str) -> None:
    """A preview cut through the secret ("…") may keep only its start: that goes too."""
    redactor = Redactor()
    for cut in _cuts(text, secret):
        clean = redactor.text(text[:cut] + "… more")
        assert not pieces_in(secret, clean), (cut, clean)


@pytest.mark.parametrize(("text", "secret"), CUT_SHAPES, ids=[t[:28] for t, _ in CUT_SHAPES])
def test_a_secret_streamed_in_two_or_three_pieces_leaves_no_piece(text: str, secret: str) -> None:
    """Each delta is redacted with what its stream said before: the password of a URL that
    arrives in the next delta, or a token cut in three, is found whole."""
    redactor = Redactor()
    said = f"Here you go: {text} and that is all."
    for cut in _cuts(said, secret):
        for pieces in ([said[:cut], said[cut:]], [said[: cut - 3], said[cut - 3 : cut + 2], said[cut + 2 :]]):
            tails = StreamTails(redactor)
            out = "".join(tails.scrub("reply", {"deltaContent": p})["deltaContent"] for p in pieces)
            assert not pieces_in(secret, out), (pieces, out)
            assert out.startswith("Here you go:") and out.endswith("that is all.")


PASSWORD_PLACES = [
    "postgres://app:{}@db:5432/x",
    "https://ci:{}@git.example.com/team/repo.git",
    "aws_secret_access_key = {}",
    "mysql --password {} prod",
    "Server=db;User Id=sa;Password={};",
    '{{"client_secret": "{}"}}',
    "the staging password: {} for now",
    "password: {}",
    "docker login -u bot -p {} registry.example.com",
]
PASSWORD_STARTS = ["9479720120484ab3f0c1", "abcdefabcdefab012345", "ABCDEFabcdefXYZ01234"]
"""Passwords whose start alone looks harmless (a port's digits, a plain word)."""


@pytest.mark.parametrize("place", PASSWORD_PLACES)
@pytest.mark.parametrize("secret", PASSWORD_STARTS)
def test_a_password_whose_start_looks_harmless_is_not_leaked_by_a_cut(place: str, secret: str) -> None:
    """A stream or a preview cut right after a password's digits or letters: that start goes
    too (the random secrets of tests/reliability/test_secrets.py hit this once in a few
    hundred runs)."""
    redactor = Redactor()
    said = "Here: " + place.format(secret) + " end."
    for cut in _cuts(said, secret):
        assert not pieces_in(secret, redactor.text(said[:cut] + "… more")), cut
        tails = StreamTails(redactor)
        out = "".join(tails.scrub("s", {"deltaContent": p})["deltaContent"] for p in [said[:cut], said[cut:]])
        assert not pieces_in(secret, out), (cut, out)


def test_a_stream_of_one_character_deltas_leaks_nothing() -> None:
    redactor = Redactor([KEY])
    for text, secret in [*CUT_SHAPES[:8], (f"key {KEY} end", KEY)]:
        tails = StreamTails(redactor)
        out = "".join(tails.scrub("s", {"deltaContent": c})["deltaContent"] for c in f"{text} done")
        assert not pieces_in(secret, out), out


# ---- records are redacted whole --------------------------------------------------------------
class Tone(StrEnum):
    LOUD = "loud ghp_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"  # an enum is a name, never redacted


class Pair(NamedTuple):
    left: str
    right: int


@dataclass(frozen=True, slots=True)
class Inner:
    note: str
    pair: Pair


@dataclass(frozen=True)
class Outer:
    title: str
    tags: tuple[str, ...]
    inner: Inner
    rows: list[dict[str, Any]]
    tone: Tone = Tone.LOUD
    count: int = 3
    ratio: float | None = 0.5
    apiKey: str = "any value at all"  # noqa: N815 - a field named like a secret goes whole
    late: str = field(default="", init=False)


def test_scrub_redacts_every_string_of_a_record_and_keeps_its_shape() -> None:
    url = f"postgres://u:{PW}@h/x"
    record = Outer(url, (url, "plain"), Inner(url, Pair(url, 7)), [{"deltaContent": url, url: [url, 1, None]}])
    object.__setattr__(record, "late", url)  # not an init field: still a field
    clean = Redactor().scrub(record)
    assert PW not in repr(clean)
    assert type(clean) is Outer and type(clean.inner) is Inner and type(clean.inner.pair) is Pair
    assert (
        clean.tags[1] == "plain"
        and clean.inner.pair.right == 7
        and clean.rows[0][f"postgres://u:{REDACTED}@h/x"][1:] == [1, None]
    )
    assert clean.tone is Tone.LOUD and clean.count == 3 and clean.ratio == 0.5
    assert clean.apiKey == REDACTED and clean.late == f"postgres://u:{REDACTED}@h/x"
    assert record.title == url  # a copy: the record itself is untouched


# ---- bounded work ------------------------------------------------------------------------
ADVERSARIAL = {
    "a run of letters": "a" * 200_000,
    "dotted words": "a." * 100_000,
    "token starts": "sk-" * 70_000,
    "URL starts": "://a:" * 40_000,
    "a URL without an @": "http://u:" + "p" * 200_000,
    "names and =": "password=" * 22_000,
    "an open quote": 'password: "' + "a" * 200_000,
    "YAML lines": "password: x\n" * 16_000,
    "PEM headers": "-----BEGIN RSA PRIVATE KEY-----\n" * 6_000,
    "an endless PEM body": "-----BEGIN RSA PRIVATE KEY-----" + "\nAAAA" * 40_000,
    "mysql words": "mysql " * 33_000,
    "ellipses": "sk-abc…" * 28_000,
    "JWT-ish dots": "eyJaaaaaaaaa." * 15_000,
    "colons": ":" * 200_000,
    "escaped quotes": '"password": "' + "\\a" * 100_000,
}


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_hostile_text_is_redacted_in_bounded_time(text: str) -> None:
    """No shape backtracks: 200 KB of the worst input for it takes well under a second (a
    quadratic pattern would take minutes)."""
    redactor = Redactor([KEY])
    start = time.perf_counter()
    redactor.text(text)
    redactor.fragment(text, before="x" * 10_000)
    assert time.perf_counter() - start < 3.0


def test_a_text_redacted_before_a_secret_was_learned_is_redacted_again_after() -> None:
    """Short texts (keys, names) have their redaction remembered: learning forgets it."""
    redactor = Redactor()
    record = {"toolName": "deploy-key-0123456789", "deploy-key-0123456789": 1}
    assert redactor.scrub(record) == record
    redactor.learn(["deploy-key-0123456789"])
    assert redactor.scrub(record) == {"toolName": REDACTED, REDACTED: 1}


@pytest.mark.parametrize("name", ["deltaContent", "inputDelta", "partialOutput"])
def test_every_streamed_field_is_read_after_its_stream(name: str) -> None:
    """Not only replies stream: the Copilot CLI streams a tool call's arguments (``inputDelta``)
    and a running tool's output (``partialOutput``) in pieces too."""
    said = f'{{"command": "psql postgres://app:{PW}@db/x"}}'
    cut = said.index(PW) + 5
    tails, stream = StreamTails(Redactor()), ("assistant.tool_call_delta", "call-1")
    out = "".join(tails.scrub(stream, {name: p})[name] for p in (said[:cut], said[cut:]))
    assert not pieces_in(PW, out), out


class CountingRedactor(Redactor):
    """Counts the long texts it redacts (the work :class:`RepeatedTexts` saves)."""

    def __init__(self) -> None:
        super().__init__()
        self.redacted: list[str] = []

    def text(self, text: str) -> str:
        self.redacted.append(text)
        return super().text(text)


def test_repeated_long_texts_are_redacted_once_while_nothing_new_is_learnt() -> None:
    redactor = CountingRedactor()
    writer = RepeatedTexts(redactor)
    secret = "hunter2-" + "q" * 30
    queue = ["prompt one " * 20 + f"password={secret}", "prompt two " * 20, "prompt three " * 20]
    record = {"queue": queue, "name": "short"}
    first = writer.scrub(record)
    assert first == redactor.scrub(record) and secret not in str(first)
    redactor.redacted.clear()
    assert writer.scrub({"queue": [*queue, "prompt four " * 20], "name": "short"})["queue"][:3] == first["queue"]
    assert redactor.redacted == ["prompt four " * 20]  # only the new one
    # A text the last pass did not see is forgotten: the writer holds no more than it wrote last.
    writer.scrub({"queue": queue[1:]})
    redactor.redacted.clear()
    writer.scrub({"queue": queue})
    assert redactor.redacted == [queue[0]]
    # What the redactor learns reaches a text it redacted before.
    known = "prompt two " * 5
    redactor.learn([known])
    assert known not in "".join(writer.scrub({"queue": queue})["queue"])
