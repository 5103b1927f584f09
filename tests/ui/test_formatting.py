"""Status words are pure functions of (view, now)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from polypilot_tui.domain.text import compact_duration
from polypilot_tui.domain.view import SessionStatus as S
from polypilot_tui.domain.view import SessionView
from polypilot_tui.ui.formatting import (
    STATUS_ICONS,
    STATUS_LABELS,
    chat_status,
    precise_duration,
    safe_text,
    sidebar_status,
)

BASE = SessionView(id="s1", name="demo-1", agent="demo", status=S.IDLE, reason="", revision=1)


def busy(status: S = S.WORKING, started: float = 0.0, last: float = 0.0, tools: int = 0, **kw) -> SessionView:
    return replace(BASE, status=status, turn_started_at=started, last_activity_at=last, tool_calls=tools, **kw)


@pytest.mark.parametrize(
    ("seconds", "compact", "precise"),
    [
        (0, "0s", "0s"),
        (45.9, "45s", "45s"),
        (125, "2m", "2m 5s"),
        (3 * 3600 + 120, "3h", "3h 2m"),
        (2 * 86400, "2d", "48h 0m"),
        (-3, "0s", "0s"),
    ],
)
def test_durations(seconds: float, compact: str, precise: str) -> None:
    assert compact_duration(seconds) == compact
    assert precise_duration(seconds) == precise


def test_every_status_has_one_cell_icon_and_a_label() -> None:
    assert set(STATUS_ICONS) == set(S) == set(STATUS_LABELS)
    assert all(len(icon) == 1 for icon in STATUS_ICONS.values())


def test_sidebar_polypilot_style() -> None:
    assert sidebar_status(busy(S.SENDING), 1) == "Sending…"
    assert sidebar_status(busy(S.THINKING, last=9), 10) == "Thinking… · 10s"
    assert sidebar_status(busy(tools=8, last=75), 120) == "2m · 8 tools · quiet 45s"
    assert sidebar_status(busy(tools=1, last=100), 120) == "2m · 1 tool"  # quiet under 30 s: not said
    assert sidebar_status(busy(S.AWAITING_PERMISSION, last=0), 40) == "Needs permission · quiet 40s"
    # Silence from before the turn began is not the turn's: a send 5 s ago after 3 quiet minutes.
    assert sidebar_status(busy(S.SENDING, started=175, last=0), 180) == "Sending… · 5s"


def test_sidebar_idle_and_ended() -> None:
    assert sidebar_status(BASE, 0) == "Idle"
    assert sidebar_status(replace(BASE, turns=2, last_activity_at=0), 59) == "Idle"
    assert sidebar_status(replace(BASE, turns=2, last_activity_at=0), 180) == "Idle · 3m ago"
    stuck = replace(BASE, status=S.STUCK, reason="no events for 121 s", last_activity_at=0)
    assert sidebar_status(stuck, 10) == "Stuck · no events for 121 s"


@pytest.mark.parametrize("status", list(S))
@pytest.mark.parametrize("history", [0, 3])
def test_each_state_has_one_word_on_every_surface(status: S, history: int) -> None:
    """The sidebar and the chat line name a state with the same word, a fresh session's too
    ("Ready" on a new one and "Idle" on a used one read as two states)."""
    view = replace(BASE, status=status, turns=history, history_len=history, reason="why", last_activity_at=0)
    word = STATUS_LABELS[status].split()[0].rstrip("…")
    for surface in (sidebar_status(view, 1), chat_status(view, 1)):
        assert surface.split()[0].rstrip("…") == word, (status, surface)
        assert "Ready" not in surface and "Waiting for your" not in surface


def test_chat_status_line() -> None:
    view = busy(tools=8, last=80, waiting_for="running bash")
    assert chat_status(view, 125) == "Working… · 2m 5s · 8 tool calls · running bash · quiet for 45s"
    assert chat_status(busy(S.THINKING, last=2), 3) == "Thinking…"  # elapsed shown from 5 s
    writing = busy(S.WRITING, last=6, waiting_for="waiting for the model")
    assert chat_status(writing, 7) == "Writing… · 7s"  # streaming: nothing to wait for
    assert chat_status(writing, 14) == "Writing… · 14s · waiting for the model · quiet for 8s"
    assert chat_status(busy(reason="tool bash still running"), 2).endswith("— tool bash still running")
    assert chat_status(replace(BASE, status=S.STOPPED, reason="stopped by user"), 0) == "Stopped — stopped by user"
    assert "reconnects" in chat_status(replace(BASE, status=S.DISCONNECTED, reason="agent exited"), 0)
    assert chat_status(replace(BASE, turns=3, last_activity_at=0), 10) == "Idle · 3 turns"


def test_a_quiet_turn_says_what_it_waits_for_and_when_the_watchdog_gives_up() -> None:
    hung = busy(S.THINKING, last=0, waiting_for="waiting for the model", gives_up_at=120)
    assert chat_status(hung, 70) == "Thinking… · 1m 10s · waiting for the model · quiet for 1m · gives up in 50s"
    assert chat_status(hung, 8).endswith("quiet for 8s")  # under 10 s of quiet: no countdown yet
    assert chat_status(hung, 121).endswith("giving up now")
    asking = busy(S.AWAITING_PERMISSION, last=0, waiting_for="waiting for your permission")
    assert chat_status(asking, 30) == "Needs permission · 30s · quiet for 30s"
    for status in S:  # no internal names reach the user
        text = chat_status(replace(hung, status=status), 70)
        assert "tier" not in text and "assistant." not in text and "session." not in text


def test_safe_text_strips_control_and_bounds_lines() -> None:
    assert safe_text("a\x1b[31mb\x07c") == "abc"
    long = safe_text("x" * 5000)
    assert len(long) < 4100 and "more characters" in long
