"""The failure classifier over what the real agents said (recorded against the scripted model
server made to answer 401, 429, 404 and with its port closed), variants of those texts, and
texts of no known class."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polypilot_tui.agents.catalog import builtin_tables
from polypilot_tui.domain.failures import (
    FailureKind,
    classify,
    failure_text,
    kind_of,
    status_code,
)

K = FailureKind

#: The turn reasons (and lost reasons) the engine derived from the real agents' errors,
#: verbatim: Copilot CLI 1.0.102 (session.error with statusCode), opencode 1.18.33 and
#: codex-acp 0.16.0 (ACP prompt errors), and the backends for agents that could not start.
REAL: list[tuple[str, str, int | None, FailureKind]] = [
    (
        "copilot",
        "agent error: Authentication failed with provider at http://127.0.0.1:37707/v1 (HTTP 401). "
        "Check your COPILOT_PROVIDER_API_KEY, COPILOT_PROVIDER_API_KEY_COMMAND, or COPILOT_PROVIDER_BEARER_TOKEN.",
        401,
        K.NEEDS_SIGN_IN,
    ),
    (
        "copilot",
        "agent error: Failed to get response from the AI model; retried 5 times (total retry wait time: "
        "53.70 seconds) Last error: 429 You exceeded your current quota, please check your plan and billing details.",
        429,
        K.RATE_LIMITED,
    ),
    (
        "copilot",
        "agent error: 429 You exceeded your current quota, please check your plan and billing details.",
        429,
        K.RATE_LIMITED,
    ),
    (
        "copilot",
        "agent error: Resource not found on provider at http://127.0.0.1:41881/v1 (HTTP 404). "
        "Check the base URL and model name.",
        404,
        K.MODEL_UNAVAILABLE,
    ),
    (
        "copilot",
        "agent error: Could not connect to local model provider at http://127.0.0.1:39153/v1. "
        "Check that the service is running and the port is correct.",
        None,
        K.SERVER_UNREACHABLE,
    ),
    (
        "opencode",
        "agent error: Internal error: Incorrect API key provided: sk-xx. You can find your API key at "
        "https://platform.openai.com/account/api-keys. ({'service': 'session', 'errorName': 'APIError'})",
        None,
        K.NEEDS_SIGN_IN,
    ),
    (
        "opencode",
        "agent error: Internal error: You exceeded your current quota, please check your plan and billing "
        "details. ({'service': 'session', 'errorName': 'APIError'})",
        None,
        K.RATE_LIMITED,
    ),
    (
        "opencode",
        "agent error: Internal error: The model `gpt-4.1` does not exist or you do not have access to it. "
        "({'service': 'session', 'errorName': 'APIError'})",
        None,
        K.MODEL_UNAVAILABLE,
    ),
    (
        "opencode",
        "agent error: Internal error: Cannot connect to API: Unable to connect. Is the computer able to access "
        "the url? ({'service': 'session', 'errorName': 'APIError'})",
        None,
        K.SERVER_UNREACHABLE,
    ),
    (
        "acp",
        "could not start the agent: the agent exited during initialize (exit code 3) — its stderr: "
        "Error: config file /nope/config.json is malformed",
        None,
        K.EXITED_AT_START,
    ),
    (
        "copilot",
        "could not start the agent: Copilot CLI failed to start: CLI process exited with code None\n"
        "stderr: Error: config file /nope/config.json is malformed",
        None,
        K.EXITED_AT_START,
    ),
    (
        "acp",
        "could not start the agent: cannot start ACP agent '/nonexistent/agent-bin': /nonexistent/agent-bin "
        "not found (or not executable)",
        None,
        K.NOT_INSTALLED,
    ),
    ("copilot", "could not start the agent: Copilot CLI not found at /nonexistent/copilot", None, K.NOT_INSTALLED),
    (  # the Copilot CLI with neither a GitHub sign-in nor a provider of one's own
        "copilot",
        "agent error: Execution failed: InvalidArg, No GitHub OAuth token or Copilot HMAC key provided",
        None,
        K.NEEDS_SIGN_IN,
    ),
    ("opencode", "agent 'opencode' cannot start here: its command opencode is not found", None, K.NOT_INSTALLED),
    (
        "copilot",
        "agent 'copilot' cannot start here: the provider key variable OPENAI_KEY is not set (api_key_env)",
        None,
        K.NEEDS_SIGN_IN,
    ),
]


@pytest.mark.parametrize(("agent", "text", "code", "kind"), REAL, ids=[f"{r[0]}-{r[3]}" for r in REAL])
def test_the_real_agents_texts_are_named(agent: str, text: str, code: int | None, kind: FailureKind) -> None:
    failure = classify(text, agent, code)
    assert failure is not None and failure.kind is kind
    assert failure.detail == text  # kept verbatim
    # The words alone name it too (a reason restored without its status code).
    assert kind_of(text) is kind


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Error: 401 Unauthorized", K.NEEDS_SIGN_IN),
        ("request failed with status code 403", K.NEEDS_SIGN_IN),
        ("invalid_api_key: the key is revoked", K.NEEDS_SIGN_IN),
        ("You are not logged in. Please log in with `codex login`.", K.NEEDS_SIGN_IN),
        ("HTTP/1.1 429 Too Many Requests", K.RATE_LIMITED),
        ("Rate limit reached for gpt-4.1 in organization org-x on tokens per min", K.RATE_LIMITED),
        ("insufficient_quota", K.RATE_LIMITED),
        ("RESOURCE_EXHAUSTED: Quota exceeded for metric", K.RATE_LIMITED),
        ("unexpected status 404 Not Found: model_not_found", K.MODEL_UNAVAILABLE),
        ("The requested model 'gpt-9' is not supported.", K.MODEL_UNAVAILABLE),
        ("Unknown model: gpt-9", K.MODEL_UNAVAILABLE),
        ("connect ECONNREFUSED 127.0.0.1:9", K.SERVER_UNREACHABLE),
        ("TypeError: fetch failed", K.SERVER_UNREACHABLE),
        ("getaddrinfo ENOTFOUND api.example.invalid", K.SERVER_UNREACHABLE),
        ("stream disconnected before completion: error sending request for url", K.SERVER_UNREACHABLE),
        ("Connection refused (os error 111)", K.SERVER_UNREACHABLE),
        ("could not start the agent: bash: opencode: command not found", K.NOT_INSTALLED),
        ("could not start the agent: [Errno 2] No such file or directory: 'codex-acp'", K.NOT_INSTALLED),
    ],
)
def test_variants_of_each_class(text: str, kind: FailureKind) -> None:
    assert kind_of(text) is kind
    assert kind_of(text.upper()) is kind  # case does not matter


@pytest.mark.parametrize(
    "text",
    [
        "",
        "agent error: session error",
        "agent disconnected: agent connection lost",
        "send failed: TimeoutError",
        "the agent lost this turn in the restart",
        "agent error: tool 'bash' crashed with exit code 1",
        "agent error: listening on port 4011 since 10:29",  # a number is not a status code
        "agent disconnected: agent process exited with code 1",  # died later on, not at its start
        "model overloaded (HTTP 529)",
    ],
)
def test_unknown_texts_stay_unnamed(text: str) -> None:
    assert classify(text, "copilot") is None


def test_a_status_code_names_what_the_words_do_not() -> None:
    failure = classify("agent error: Bad things happened", "copilot", 401)
    assert failure is not None and failure.kind is K.NEEDS_SIGN_IN
    assert classify("agent error: Bad things happened", "copilot", 500) is None
    # Words that name a class outrank the code: a 404 that says "rate limit" is a rate limit.
    failure = classify("404: rate limit exceeded", "", 404)
    assert failure is not None and failure.kind is K.RATE_LIMITED


@pytest.mark.parametrize(
    ("text", "code"),
    [("(HTTP 401)", 401), ("Last error: 429 You exceeded", 429), ("status code 403", 403), ("HTTP 404", 404)],
)
def test_status_codes_are_read_from_the_text(text: str, code: int) -> None:
    assert status_code(text) == code


@given(
    kind=st.sampled_from(
        [(401, K.NEEDS_SIGN_IN), (403, K.NEEDS_SIGN_IN), (404, K.MODEL_UNAVAILABLE), (429, K.RATE_LIMITED)]
    ),
    before=st.text(alphabet=st.characters(whitelist_categories=("Ll", "Zs")), max_size=40),
    after=st.text(alphabet=st.characters(whitelist_categories=("Ll", "Zs")), max_size=40),
    form=st.sampled_from(["(HTTP {})", "HTTP {}", "status code {}", "statusCode: {}", "Last error: {}"]),
)
def test_a_code_in_any_usual_form_names_the_class(
    kind: tuple[int, FailureKind], before: str, after: str, form: str
) -> None:
    code, expected = kind
    text = f"agent error: {before} {form.format(code)} {after}"
    found = kind_of(text)
    # Lowercase words around it may themselves name a class (hypothesis finds "quota"…); then they win.
    words = kind_of(f"agent error: {before} {after}")
    assert found is (words or expected)


def test_the_fix_is_the_agents_own_sign_in_from_its_catalog_entry() -> None:
    codex = str(builtin_tables()["codex"]["sign_in"])
    failure = classify("401 Unauthorized", codex)
    assert failure is not None and failure.title == "needs sign-in" and failure.fix == codex
    generic = classify("401 Unauthorized")
    assert generic is not None and "sign in" in generic.fix and "codex" not in generic.fix
    assert failure.to_json() == {"kind": "needs-sign-in", "title": "needs sign-in", "fix": failure.fix}


def test_the_chat_row_says_title_words_and_fix() -> None:
    text = failure_text("agent error: Resource not found (HTTP 404).", "copilot", "HTTP 404")
    assert text.startswith("Model unavailable — agent error: Resource not found (HTTP 404).\nFix: pick a model")
    assert failure_text("agent error: session error", "copilot") == "agent error: session error"


@given(st.text(max_size=400), st.sampled_from(["", "copilot", "codex", "opencode", "x"]))
def test_any_text_is_named_or_left_alone_never_changed(text: str, agent: str) -> None:
    failure = classify(text, agent)
    assert failure is None or (failure.detail == text and failure.title and failure.fix)


@pytest.mark.parametrize(
    "text",
    [
        "agent error: tool bash exited after 404 ms",
        "agent error: file src/a.py is not found",
        "agent error: the request timed out after 30 s of silence",
        "agent error: Write forbidden by sandbox policy",
        "agent error: processed 429 items, then stopped",
        "agent error: the quota table has 3 rows",
        "agent error: bash: foo: command not found",
        "agent error: the subprocess exited with code 2",
        "could not start the agent: the Copilot CLI did not answer within 60 s",
    ],
)
def test_ordinary_failures_are_not_given_a_name_they_do_not_have(text: str) -> None:
    assert classify(text) is None, kind_of(text)


SANDBOX_PROBLEMS = [  # agents/sandbox.py's words, each with how to fix it
    "bubblewrap (bwrap) is not installed: install it with `sudo apt install bubblewrap` (Debian, Ubuntu)",
    "user namespaces are off (user.max_user_namespaces is 0): "
    "turn them on with `sudo sysctl -w user.max_user_namespaces=15000`",
    "AppArmor keeps programs from making user namespaces (kernel.apparmor_restrict_unprivileged_userns is 1, "
    "as on Ubuntu 24.04): allow it with `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, "
    "or give bwrap an AppArmor profile that allows userns",
    "bubblewrap cannot make a sandbox here: bwrap: setting up uid map: Permission denied",
    "sandboxed sessions run on Linux with bubblewrap; this machine is not Linux (see docs/sandbox.md)",
]
SANDBOX_SAID = [  # where polypilot says it: a restore, the new-session check, a start (a send's connect)
    "the session is sandboxed and its sandbox cannot start: {}",
    "the session cannot run sandboxed here: {}",
    "could not connect: could not start the agent: the session is sandboxed and its sandbox cannot start: {}",
]


@pytest.mark.parametrize("said", SANDBOX_SAID)
@pytest.mark.parametrize("problem", SANDBOX_PROBLEMS)
def test_a_sandbox_that_cannot_start_is_named_for_it_with_its_own_fix(said: str, problem: str) -> None:
    """The agent is installed: "bwrap is not installed" must not read "agent not installed —
    install the agent"; the fix is the sandbox's own (install bubblewrap, the sysctl)."""
    failure = classify(said.format(problem), "copilot")
    assert failure is not None and failure.kind is K.SANDBOX_UNAVAILABLE, failure
    assert failure.title == "sandbox cannot start" and failure.fix == problem
    assert failure_text(said.format(problem)).startswith("Sandbox cannot start — ")


def test_an_agent_that_cannot_start_is_still_named_for_itself() -> None:
    text = "agent 'opencode' cannot start here: its command opencode is not installed"
    assert kind_of(text) is K.NOT_INSTALLED
    assert kind_of("agent error: bash: line 1: sandbox: command not found") is None  # a turn's words
