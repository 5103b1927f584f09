"""Permission/shell/MCP failure classification and the 3-of-5 window (core/permissions.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polypilot_tui.domain.permissions import (
    TRIP_THRESHOLD,
    WINDOW_SIZE,
    DenialWindow,
    FailureKind,
    classify_failure,
    is_mcp_error,
    is_permission_denial,
    is_shell_failure,
)

DENIED = "Permission denied and could not request permission from user"
SHELL = "posix_spawn failed: No such file or directory"
MCP = "MCP server 'github' exited"
OTHER = "command exited with code 1"


# --- classifiers (spec §7) --------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Permission denied",
        "permission denied: /etc/shadow",
        "Error: PERMISSION DENIED by policy",
        "denied-no-approval-rule",
        "The tool call was rejected (denied-no-approval-rule).",
        "could not request permission",
        "Could not request permission from user",
    ],
)
def test_permission_denial_texts(text: str) -> None:
    assert is_permission_denial(text)
    assert classify_failure(text) is FailureKind.PERMISSION


@pytest.mark.parametrize(
    "text", ["", "denied", "permission granted", "no approval rule", OTHER, "Permission was denied"]
)
def test_not_permission_denial(text: str) -> None:
    assert not is_permission_denial(text)


@pytest.mark.parametrize("text", ["posix_spawn failed", SHELL, "Error: POSIX_SPAWN FAILED (errno 2)"])
def test_shell_failure_texts(text: str) -> None:
    assert is_shell_failure(text)
    assert classify_failure(text) is FailureKind.SHELL


@pytest.mark.parametrize("text", ["posix_spawn", "spawn failed", "shell exited 127", ""])
def test_not_shell_failure(text: str) -> None:
    assert not is_shell_failure(text)


@pytest.mark.parametrize(
    "text",
    [
        "MCP server 'github' failed",
        "mcp server unreachable",
        "mcp_server: bad response",
        "mcp: connect ECONNREFUSED 127.0.0.1:3000",
        "mcp-filesystem: spawn ENOENT",
        "MCP connection refused",
        "mcp: server disconnected",
        "mcp transport error",
        "mcp process failed to start",
        "mcp: server process exited with code 1",
    ],
)
def test_mcp_error_texts(text: str) -> None:
    assert is_mcp_error(text)
    assert classify_failure(text) is FailureKind.MCP


@pytest.mark.parametrize(
    "text",
    [
        "connect ECONNREFUSED 127.0.0.1:3000",  # no "mcp" anywhere
        "spawn ENOENT",
        "mcp tool returned nothing",  # "mcp" without a failure marker
        "",
    ],
)
def test_not_mcp_error(text: str) -> None:
    assert not is_mcp_error(text)


def test_classification_precedence() -> None:
    # Permission beats shell beats MCP when a text matches several.
    assert classify_failure("MCP server: permission denied") is FailureKind.PERMISSION
    assert classify_failure("posix_spawn failed inside MCP server") is FailureKind.SHELL
    assert classify_failure(OTHER) is FailureKind.OTHER
    assert classify_failure("") is FailureKind.OTHER


# --- DenialWindow -----------------------------------------------------------------------


def test_defaults() -> None:
    assert (WINDOW_SIZE, TRIP_THRESHOLD) == (5, 3)
    w = DenialWindow()
    assert w.count == 0 and not w.tripped and w.last_kind is None


def test_success_records_but_never_trips() -> None:
    w = DenialWindow()
    assert [w.record(True) for _ in range(10)] == [False] * 10
    assert w.count == 0 and not w.tripped


def test_three_consecutive_denials_trip() -> None:
    w = DenialWindow()
    assert w.record(False, DENIED) is False
    assert w.record(False, DENIED) is False
    assert not w.tripped and w.count == 2
    assert w.record(False, DENIED) is True
    assert w.tripped and w.count == 3 and w.last_kind is FailureKind.PERMISSION


def test_sliding_window_tolerates_occasional_ok() -> None:
    # AgentSessionInfoTests.HasPermissionIssue_SlidingWindowToleratesOccasionalOk
    w = DenialWindow()
    w.record(False, DENIED)
    w.record(False, DENIED)
    w.record(True)  # one OK call would have reset a strict consecutive counter
    assert not w.tripped
    assert w.record(False, DENIED) is True
    assert w.tripped and w.count == 3


def test_three_of_five_with_two_oks_interleaved() -> None:
    w = DenialWindow()
    fired = [w.record(False, DENIED), w.record(True), w.record(False, DENIED), w.record(True), w.record(False, DENIED)]
    assert fired == [False, False, False, False, True]
    assert w.tripped


def test_old_denials_slide_out() -> None:
    w = DenialWindow()
    for ok in (False, True, True, False, True):
        w.record(ok, DENIED)
    assert w.count == 2
    w.record(True)  # pushes the oldest denial out: window = OK OK D OK OK
    assert w.count == 1
    assert w.record(False, DENIED) is False  # 2 of 5
    assert not w.tripped


def test_trip_fires_exactly_once_while_count_stays_at_or_above_three() -> None:
    w = DenialWindow()
    results = [w.record(False, DENIED) for _ in range(8)]
    assert results == [False, False, True, False, False, False, False, False]
    assert w.count == 5


def test_no_refire_when_a_denial_replaces_a_denial_at_three() -> None:
    w = DenialWindow()
    for ok in (False, False, False, True, True):  # D D D OK OK: tripped once
        w.record(ok, DENIED)
    # The new denial pushes out the oldest denial: still 3 of 5, not a new episode.
    assert w.record(False, DENIED) is False
    assert w.count == 3


def test_refires_after_window_recovered_below_three() -> None:
    # Documented behaviour: fires on each transition from <3 to 3 (a new episode).
    w = DenialWindow()
    for _ in range(3):
        w.record(False, DENIED)
    for _ in range(4):
        w.record(True)  # window = D OK OK OK OK -> count 1
    assert w.count == 1 and not w.tripped
    assert [w.record(False, DENIED) for _ in range(3)] == [False, False, True]


def test_other_errors_are_not_recorded() -> None:
    w = DenialWindow()
    w.record(False, DENIED)
    w.record(False, DENIED)
    for _ in range(10):
        assert w.record(False, OTHER) is False
    assert w.count == 2 and w.last_kind is FailureKind.PERMISSION
    assert w.record(False, DENIED) is True  # the OTHER errors did not push denials out


def test_failure_without_text_is_not_recorded() -> None:
    w = DenialWindow()
    for _ in range(5):
        assert w.record(False) is False
    assert w.count == 0


def test_shell_and_mcp_count_and_last_kind_tracks_newest() -> None:
    w = DenialWindow()
    w.record(False, SHELL)
    assert w.last_kind is FailureKind.SHELL
    w.record(False, MCP)
    assert w.last_kind is FailureKind.MCP
    assert w.record(False, DENIED) is True
    assert w.last_kind is FailureKind.PERMISSION
    w.record(True)
    assert w.last_kind is FailureKind.PERMISSION  # a success does not erase the reason


def test_clear_resets_and_rearms() -> None:
    w = DenialWindow()
    for _ in range(3):
        w.record(False, DENIED)
    assert w.tripped
    w.clear()
    assert w.count == 0 and not w.tripped and w.last_kind is None
    assert [w.record(False, MCP) for _ in range(3)] == [False, False, True]


def test_clear_forgets_successes_too() -> None:
    w = DenialWindow()
    for _ in range(5):
        w.record(True)
    w.clear()
    w.record(False, DENIED)
    w.record(False, DENIED)
    assert w.record(False, DENIED) is True


def test_custom_size_and_threshold() -> None:
    w = DenialWindow(size=3, threshold=2)
    assert w.record(False, DENIED) is False
    assert w.record(True) is False
    assert w.record(False, DENIED) is True
    w.record(True)  # size 3: window = OK D OK
    assert w.count == 1 and not w.tripped


# --- property: fires iff the count crosses the threshold ------------------------------

results = st.lists(st.one_of(st.just(None), st.sampled_from([DENIED, SHELL, MCP, OTHER])), max_size=40)


@given(results)
def test_property_matches_reference_model(seq: list[str | None]) -> None:
    """None = success; a string = a failure with that text. Reference: a plain list."""
    w = DenialWindow()
    window: list[bool] = []
    for item in seq:
        fired = w.record(item is None, item or "")
        if item is None:
            window.append(False)
            expected = False
        elif item == OTHER:
            expected = False
        else:
            before = sum(window[-5:])
            window.append(True)
            expected = before < 3 <= sum(window[-5:])
        assert fired is expected
        assert w.count == sum(window[-5:])
        assert w.tripped is (w.count >= 3)
