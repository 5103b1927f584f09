"""The compare view's words (ui/screens/compare.py, compare_flow.py): each attempt named in what
a pick did, a check's result in one cell, why an attempt ended only when it did not complete."""

from __future__ import annotations

from dataclasses import replace

from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.fan_out import Attempt, CheckResult, Comparison, Discarded
from polypilot_tui.domain.usage import Usage
from polypilot_tui.domain.workspace import MergeResult
from polypilot_tui.engine.verbs import PickResult
from polypilot_tui.ui.screens.compare import attempt_detail, check_text, status_text
from polypilot_tui.ui.screens.compare_flow import pick_text

ONE = Attempt("s1", "one", "demo", "idle", "completed", 12.0, Usage(), ChangeStats(1, 2, 0), None, "session.idle")
TWO = replace(ONE, session_id="s2", name="two")
THREE = replace(ONE, session_id="s3", name="three")
GROUP = Comparison("g", "task", "pytest -q", (ONE, TWO, THREE), base="main")


def test_a_pick_names_the_merged_the_discarded_and_the_kept_with_why() -> None:
    result = PickResult(
        "g",
        "s1",
        MergeResult(True, "merged into main"),
        committed="0123456789abcdef",
        discarded=(Discarded("s2", True, "removed"), Discarded("s3", False, "1 uncommitted file (new: junk.txt)")),
    )
    said = pick_text(result, GROUP)
    assert said.splitlines() == [
        "Merged “one”: merged into main (its uncommitted work committed as 0123456789)",
        "Discarded: two.",
        "Kept “three”: 1 uncommitted file (new: junk.txt) (F5 on it finishes or discards it).",
    ]


def test_a_merge_that_failed_names_the_conflicts_and_discards_nothing() -> None:
    result = PickResult("g", "s2", MergeResult(False, "conflicts with main", ("a.txt", "b.txt")))
    said = pick_text(result, GROUP)
    assert said.startswith("“two” was not merged: conflicts with main.")
    assert "a.txt, b.txt" in said and "Nothing was discarded." in said


def test_check_cells() -> None:
    assert check_text(ONE, configured=False) == "—"
    assert check_text(ONE, configured=True) == "not run"
    assert check_text(replace(ONE, checking=True), configured=True) == "running…"
    assert check_text(replace(ONE, check=CheckResult(0, "", 65.0)), True) == "✓ passed · 1m 5s"
    assert check_text(replace(ONE, check=CheckResult(2, "", 3.0)), True) == "✗ exit 2 · 3s"
    assert check_text(replace(ONE, check=CheckResult(None, "", 600.0, timed_out=True)), True).startswith("✗ timed out")
    assert "could not run: no sh" in check_text(replace(ONE, check=CheckResult(None, "", 0.0, error="no sh")), True)


def test_why_an_attempt_ended_is_said_only_when_it_did_not_complete() -> None:
    assert "Ended" not in attempt_detail(GROUP, ONE)  # "session.idle" is an event's name, not a reason
    stuck = replace(ONE, outcome="stuck", status="stuck", reason="no activity for 120 s")
    assert "Ended stuck: no activity for 120 s" in attempt_detail(GROUP, stuck)
    assert status_text(stuck) == "⚑ stuck" and status_text(replace(ONE, status="closed", outcome="")) == "closed"


def test_the_check_output_tail_is_shown_without_control_sequences() -> None:
    output = "".join(f"line {n}\n" for n in range(40)) + "\x1b[31mFAILED\x1b[0m test_x\n"
    detail = attempt_detail(GROUP, replace(ONE, check=CheckResult(1, output, 1.0)))
    assert "line 39" in detail and "line 20" not in detail and "FAILED test_x" in detail and "\x1b" not in detail


def test_a_discarded_attempt_says_so_and_a_check_that_timed_out_says_that() -> None:
    assert status_text(replace(ONE, discarded=True)) == "✕ discarded"
    timed_out = CheckResult(None, "", 600.0, timed_out=True, error="did not end within 600 s")
    assert check_text(replace(ONE, check=timed_out), True).startswith("✗ timed out")
