"""Attention: one ping per state, never for the session on screen, unread until seen."""

from __future__ import annotations

from dataclasses import replace

from polypilot_tui.domain.turn import PermissionPrompt
from polypilot_tui.domain.view import SessionStatus as S
from polypilot_tui.domain.view import SessionView
from polypilot_tui.ui.attention import Attention

IDLE = SessionView(id="s2", name="worker", agent="demo", status=S.IDLE, reason="", revision=1)
WORKING = replace(IDLE, status=S.WORKING, revision=2)
DONE = replace(IDLE, turns=1, last_outcome="completed", revision=3)
ASK = replace(
    WORKING,
    status=S.AWAITING_PERMISSION,
    revision=4,
    pending_permission=PermissionPrompt("perm-1", "Run shell command: rm -rf build"),
)


def test_finished_unseen_marks_unread_and_pings_once() -> None:
    attention = Attention()
    assert attention.observe(IDLE, WORKING, on_screen=False) is None
    alert = attention.observe(WORKING, DONE, on_screen=False)
    assert alert is not None and alert.title == "worker finished" and alert.severity == "information"
    assert "s2" in attention.unread and attention.wants_user(DONE)
    assert attention.observe(DONE, replace(DONE, revision=5), on_screen=False) is None  # same state
    attention.seen("s2")
    assert not attention.wants_user(DONE)


def test_never_for_the_session_on_screen() -> None:
    attention = Attention()
    assert attention.observe(WORKING, ASK, on_screen=True) is None
    assert attention.observe(ASK, DONE, on_screen=True) is None
    assert not attention.unread
    # looking away later does not replay the permission request already seen
    assert attention.observe(ASK, replace(ASK, revision=9), on_screen=False) is None


def test_permission_pings_once_per_request() -> None:
    attention = Attention()
    alert = attention.observe(WORKING, ASK, on_screen=False)
    assert alert is not None and "needs permission" in alert.title and "rm -rf build" in alert.message
    assert attention.observe(ASK, replace(ASK, revision=7), on_screen=False) is None
    second = replace(ASK, revision=8, pending_permission=PermissionPrompt("perm-2", "Write file"))
    assert attention.observe(ASK, second, on_screen=False) is not None


def test_stuck_and_error_ends_are_warnings_with_the_reason() -> None:
    attention = Attention()
    stuck = replace(IDLE, status=S.STUCK, turns=1, last_outcome_reason="no events for 121 s", revision=9)
    alert = attention.observe(WORKING, stuck, on_screen=False)
    assert alert is not None and alert.severity == "warning" and "121 s" in alert.message
    error = replace(stuck, status=S.ERROR, turns=2, last_outcome_reason="model overloaded")
    assert attention.observe(stuck, error, on_screen=False).severity == "error"


def test_new_and_closed_sessions() -> None:
    attention = Attention()
    assert attention.observe(None, DONE, on_screen=False) is None  # restored sessions don't ping
    asking = Attention().observe(None, replace(ASK, id="s9"), on_screen=False)
    assert asking is not None and "needs permission" in asking.title  # but one that asks does
    attention.observe(WORKING, DONE, on_screen=False)
    attention.forget("s2")
    assert not attention.unread
    assert attention.wants_user(replace(IDLE, status=S.DISCONNECTED))
