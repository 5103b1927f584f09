"""The status surfaces' words for a named failure: the sidebar says its title, the chat's
status line its title and fix first (it is cut at the pane's width), then the agent's words."""

from __future__ import annotations

from polypilot_tui.agents.catalog import builtin_tables
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.turn import EndCause, Outcome
from polypilot_tui.domain.view import SessionStatus, SessionView, make_view
from polypilot_tui.ui.formatting import chat_status, sidebar_status

REASON = "agent error: 429 You exceeded your current quota, please check your plan and billing details."


def failed_view(reason: str, detail: str = "") -> SessionView:
    session = Session("s1", "one", "codex", sign_in=str(builtin_tables()["codex"]["sign_in"]))
    session.begin_turn("hello", 10.0)
    session.end_turn(Outcome.FAILED, EndCause.AGENT_ERROR, reason, 11.0, 1011.0, detail)
    return make_view(session)


def test_a_named_failure_reads_by_its_name() -> None:
    view = failed_view(REASON, "HTTP 429")
    assert view.status is SessionStatus.ERROR and view.failure is not None
    assert sidebar_status(view, 12.0) == "rate-limited"
    line = chat_status(view, 12.0)
    assert line.startswith(f"Rate-limited — Fix: {view.failure.fix} · agent error: 429 You exceeded")


def test_the_status_code_of_the_turn_names_what_the_words_do_not() -> None:
    view = failed_view("agent error: Bad request", "HTTP 401")
    assert view.failure is not None and view.failure.title == "needs sign-in"
    assert "codex login" in view.failure.fix


def test_an_unnamed_failure_reads_as_before() -> None:
    view = failed_view("agent error: session error")
    assert view.failure is None
    assert sidebar_status(view, 12.0) == "Error · agent error: session error"
    assert chat_status(view, 12.0) == "Error — agent error: session error"


def test_a_session_at_work_has_no_failure_whatever_its_last_reason() -> None:
    session = Session("s1", "one", "codex")
    session.begin_turn("hello", 10.0)
    session.end_turn(Outcome.FAILED, EndCause.AGENT_ERROR, REASON, 11.0, 1011.0, "HTTP 429")
    session.begin_turn("again", 12.0)
    assert make_view(session).failure is None
