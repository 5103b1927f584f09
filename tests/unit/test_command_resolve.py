"""SESSION and OPTION on the command line: one rule for every command."""

from __future__ import annotations

import pytest

from polypilot_tui.commands.live import CommandFailed
from polypilot_tui.commands.resolve import NoSuchSession, pick_session
from polypilot_tui.commands.sessions import choose_option
from polypilot_tui.domain.turn import PermissionPrompt

SESSIONS = [("a1", "fix"), ("b2", "docs"), ("c3", "docs"), ("fix", "other")]


def pick(key: str) -> tuple[str, str]:
    return pick_session(key, SESSIONS, lambda s: s[0], lambda s: s[1])


def test_an_id_wins_over_a_name_and_a_shared_name_is_refused() -> None:
    assert pick("b2") == ("b2", "docs")
    assert pick("fix") == ("fix", "other")  # an id first, even when a session is named so
    assert pick("other") == ("fix", "other")
    with pytest.raises(NoSuchSession, match="2 sessions are named 'docs'"):
        pick("docs")
    with pytest.raises(NoSuchSession, match="no session 'zz'"):
        pick("zz")


PROMPT = PermissionPrompt(
    "r1",
    "Run it",
    options=(
        ("allow_once", "Allow once", "allow_once"),
        ("allow_always", "Allow always", "allow_always"),
        ("no", "Reject", "reject_once"),
    ),
)


def test_an_option_by_id_or_a_unique_start_of_its_id_or_label() -> None:
    assert choose_option(PROMPT, "no") == ("no", "Reject")
    assert choose_option(PROMPT, "rej") == ("no", "Reject")
    assert choose_option(PROMPT, "Allow O") == ("allow_once", "Allow once")
    with pytest.raises(CommandFailed, match="'allow' fits 2 options") as many:
        choose_option(PROMPT, "allow")
    assert many.value.code == 2
    with pytest.raises(CommandFailed, match="no option 'maybe'"):
        choose_option(PROMPT, "maybe")
