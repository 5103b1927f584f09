"""Snapshot tests: every state on virtual time, fixed ids, no blink, no toasts left to expire;
the dashboard attached to a served engine, as ``polypilot`` runs (a case says where not).

Review SVG changes (``snapshot_report.html`` or ``rsvg-convert``) before ``--snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from polypilot_tui.ui.widgets.code_block import CodeBlock
from polypilot_tui.ui.widgets.tool_call_row import ToolCallRow
from tests.snapshots import agent_scenarios, scenarios, team_scenarios
from tests.snapshots.fakes import Driver, build_app
from tests.ui.helpers import EngineShape, shaped

Scenario = Callable[[Driver], Awaitable[Any]]


@dataclass(frozen=True)
class Case:
    """One snapshot: a scenario, what to select afterwards, a terminal size and a theme."""

    scenario: Scenario | None
    size: tuple[int, int] = (120, 36)
    theme: str = "polypilot-night"
    select: str | None = None
    """A status key of ``all_statuses`` or a session id to put on screen at the end."""
    press: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    then: Callable[[Driver], Awaitable[Any]] | None = None
    """Something to do once the session is on screen (unfold a tool row, scroll a code block)."""
    shape: EngineShape = "served"
    """Attached to a served engine, as ``polypilot`` runs; in process (``--in-process``) only
    where the dashboard shows something else then."""


async def _nothing(d: Driver) -> None:
    return None


async def _stuck(d: Driver) -> str:
    return await scenarios.stuck_session(d)


async def _streaming(d: Driver) -> str:
    sid = await scenarios.streaming_session(d)
    await d.advance(12)
    return sid


async def _unfold_last_tool_row(d: Driver) -> None:
    row = d.app.pane.query(ToolCallRow).last()
    row.action_toggle_output()
    await d.settle()
    row.screen.scroll_to_widget(row, animate=False, top=True)


async def _scroll_code(d: Driver) -> None:
    code = d.app.pane.query_one(CodeBlock)
    code.scroll_to(x=code.max_scroll_x, animate=False)  # to the end of the 300-character line


CASES: dict[str, Case] = {
    "empty_start": Case(_nothing, size=(100, 30)),
    "first_start_agents_found": Case(agent_scenarios.first_start, size=(100, 30)),
    "all_statuses_wide": Case(scenarios.all_statuses, size=(160, 45), select="working"),
    "all_statuses_narrow": Case(scenarios.all_statuses, size=(80, 24), select="working"),
    "all_statuses_day": Case(scenarios.all_statuses, size=(160, 45), theme="polypilot-day", select="stuck"),
    "streaming_turn": Case(_streaming, select="s2"),
    "streaming_turn_day": Case(_streaming, theme="polypilot-day", select="s2"),
    "streaming_turn_narrow": Case(_streaming, size=(80, 24), select="s2"),
    "permission_warning": Case(scenarios.denied_session, select="s2"),
    "permission_prompt": Case(scenarios.all_statuses, select="awaiting_permission"),
    "permission_long_options": Case(scenarios.codex_permission, size=(100, 30), select="s2"),
    # After ctrl+g: the keys on the card and in the footer, those of the options offered only.
    "permission_by_key": Case(scenarios.codex_permission, size=(100, 30), select="s2", press=("ctrl+g",)),
    "stuck_after_watchdog": Case(_stuck, select="s2"),
    "interrupted_restore": Case(scenarios.interrupted_session, size=(100, 30), select="s9"),
    "new_session_modal": Case(scenarios.new_session_dialog, size=(100, 36)),
    "new_session_worktree": Case(scenarios.new_session_in_git, size=(100, 46)),
    "new_session_catalog": Case(agent_scenarios.new_session_catalog, size=(100, 40)),
    "finish_dialog": Case(scenarios.finish_dialog, size=(100, 40)),
    "worktree_sessions": Case(scenarios.worktree_sessions, size=(120, 30), select="s3"),
    "worktree_sessions_narrow": Case(scenarios.worktree_sessions, size=(80, 24), select="s3"),
    "prompt_editor_multiline": Case(scenarios.multiline_draft, size=(100, 30)),
    "queue_while_busy": Case(lambda d: scenarios.queued_prompts(d, held=False), size=(100, 30)),
    "queue_held_after_stop": Case(lambda d: scenarios.queued_prompts(d, held=True), size=(100, 30)),
    "details_view": Case(scenarios.failed_with_details, size=(120, 36)),
    "close_confirmation": Case(scenarios.close_confirmation, size=(100, 30)),
    "quit_confirmation": Case(scenarios.quit_confirmation, size=(100, 30)),
    # In process the turns end with the dashboard: it says so, and offers no engine to stop.
    "quit_confirmation_in_process": Case(scenarios.quit_confirmation, size=(100, 30), shape="local"),
    "hostile_markdown": Case(scenarios.hostile_session, size=(120, 46), select="hostile"),
    "hostile_markdown_narrow": Case(scenarios.hostile_session, size=(80, 50), select="hostile"),
    "hostile_code_scrolled": Case(scenarios.hostile_session, size=(120, 46), select="hostile", then=_scroll_code),
    "tool_rows_unfolded": Case(
        scenarios.tool_states_session, size=(120, 46), select="tools", then=_unfold_last_tool_row
    ),
    "model_picker": Case(agent_scenarios.model_picker, size=(100, 30)),
    # Issue 24: marks for a broadcast, a team under its orchestrator with a bound reached, a fan-out.
    "multi_select_sidebar": Case(team_scenarios.marked_sessions, size=(120, 30)),
    "team_bound_reached": Case(team_scenarios.team_with_a_bound_reached, size=(120, 30), select="s2"),
    "compare_view": Case(team_scenarios.compare_view, size=(130, 36)),
    "fan_out_dialog": Case(team_scenarios.fan_out_dialog, size=(100, 44)),
    # Issue 27: the sandbox's marks (with and without a network rule), a write it refused, F2.
    "sandbox_marks": Case(scenarios.sandboxed_sessions, size=(110, 24), select="boxed"),
    "sandbox_marks_day": Case(scenarios.sandboxed_sessions, size=(110, 24), theme="polypilot-day", select="boxed"),
    "sandbox_details": Case(scenarios.sandbox_details, size=(110, 40)),
    "new_session_sandboxed": Case(scenarios.new_session_sandboxed, size=(100, 36), theme="polypilot-day"),
}


def run_before_for(case: Case) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        driver = Driver(pilot)
        await driver.settle()
        result = await case.scenario(driver) if case.scenario else None
        target = case.select
        if isinstance(result, dict) and target in result:
            target = result[target]
        if target:
            driver.app.select(target)
        await driver.settle()
        if case.then is not None:
            await case.then(driver)
            await driver.settle()
        driver.app.clear_notifications()  # toasts expire on real time: never part of a snapshot
        await driver.settle()

    return run_before


@pytest.mark.parametrize("name", list(CASES))
def test_snapshot(name: str, snap_compare: Any, tmp_path: Path) -> None:
    case = CASES[name]
    with shaped(case.shape):
        app = build_app(tmp_path, theme=case.theme, **case.options)
    assert snap_compare(app, terminal_size=case.size, run_before=run_before_for(case), press=case.press)
