"""The one redactor (storage/redact.py): what it learns, and what a cut can no longer leak."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from polypilot_tui.config import AgentConfig, ProviderConfig
from polypilot_tui.domain.text import one_line
from polypilot_tui.infra.redact import REDACTED, REDACTOR, Redactor, is_secret_key, looks_like_key
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
    assert redactor.value({"deltaContent": middle, "toolName": "bash"}) == {
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
