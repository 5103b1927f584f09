"""The manager driving the demo agent in virtual time: every fault script ends honestly."""

from __future__ import annotations

import pytest

from polypilot_tui.agents.base import ALLOW_ONCE, REJECT_ONCE
from polypilot_tui.agents.demo.scripts import SCRIPTS
from polypilot_tui.domain.sandbox import NO_SANDBOX, Sandbox, SandboxMode
from polypilot_tui.domain.view import SessionStatus
from tests.support.engine import Harness


async def test_tool_turn_completes_with_rows_and_text(harness: Harness) -> None:
    sid = await harness.new()
    assert await harness.manager.send(sid, "please look around the project") == "sent"
    await harness.until_rest(sid)
    assert harness.outcomes(sid) == [("completed", "session.idle")]
    history = harness.manager.history(sid)
    kinds = [item.kind.value for item in history]
    assert kinds[0] == "user" and "tool" in kinds and kinds[-1] == "assistant"
    tool = next(item for item in history if item.kind.value == "tool")
    assert tool.tool_status == "completed" and "README.md" in tool.text
    assert "Let me look" in harness.texts(sid) and harness.manager.view(sid).status is SessionStatus.IDLE


async def test_zero_idle_completes_four_seconds_after_turn_end(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!zero-idle")
    await harness.until_rest(sid)
    [(outcome, reason)] = harness.outcomes(sid)
    assert outcome == "completed" and reason == "the agent finished its reply but never reported idle (4 s)"
    assert harness.details(sid) == ["no session.idle 4 s after assistant.turn_end"]
    assert "session.idle will never come" in harness.texts(sid)


async def test_hang_after_final_tool_completes_after_the_idle_window(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!hang-after-final-tool")
    await harness.until_rest(sid)
    [(outcome, reason)] = harness.outcomes(sid)
    assert outcome == "completed" and reason == "the reply was complete and nothing followed for 30 s"
    assert harness.clock.now() < 40


async def test_permission_loss_recovers_and_resends(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!permission-loss")
    await harness.until_rest(sid)
    outcomes = [o for o, _ in harness.outcomes(sid)]
    assert outcomes[0] == "recovered" and outcomes[-1] == "completed"
    acts = [a for _, _, a, _ in harness.actions]
    assert acts.count("reconnect") == 1 and "resend" in acts
    text = harness.texts(sid)
    assert "Permission errors detected" in text and "⟳ Resending" in text


async def test_permission_loss_after_a_success_skips_the_resend(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!permission-loss-mixed")
    await harness.until_rest(sid)
    assert [o for o, _ in harness.outcomes(sid)] == ["recovered"]
    assert "Auto-resend skipped" in harness.texts(sid)
    assert "resend" not in [a for _, _, a, _ in harness.actions]


async def test_recovery_gives_up_after_two_attempts(harness: Harness) -> None:
    sid = await harness.new()
    harness.manager.recovery.begin(sid, 0.0)
    harness.manager.recovery.finish(sid)
    harness.manager.recovery.begin(sid, 0.0)
    harness.manager.recovery.finish(sid)
    await harness.manager.send(sid, "!permission-loss")
    await harness.until(lambda: "Multiple recovery attempts failed" in harness.texts(sid))
    assert harness.manager.view(sid).permission_warning
    assert "reconnect" not in [a for _, _, a, _ in harness.actions]
    await harness.manager.stop(sid)
    assert harness.manager.view(sid).status is SessionStatus.STOPPED


async def test_crash_mid_tool_disconnects_then_resume_aborts_the_tool_first(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!crash-mid-tool")
    await harness.until_rest(sid)
    [(outcome, reason)] = harness.outcomes(sid)
    assert outcome == "failed" and "disconnected" in reason
    assert harness.clock.now() < 5  # at once, not after a watchdog tier
    assert harness.manager.view(sid).status is SessionStatus.DISCONNECTED
    harness.actions.clear()
    await harness.manager.send(sid, "hello again")
    await harness.until_rest(sid)
    acts = [a for _, _, a, _ in harness.actions]
    assert acts[:2] == ["abort", "send"]  # #393: the wedged tool is aborted before the send
    assert harness.outcomes(sid)[-1] == ("completed", "session.idle")
    assert "Session reconnected: resumed" in harness.texts(sid)


async def test_usage_flood_is_stuck_120s_after_the_last_real_event(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!usage-flood")
    await harness.until_rest(sid)
    [(outcome, reason)] = harness.outcomes(sid)
    assert outcome == "stuck" and reason == "no activity for 120 s (waiting for the model)"
    assert harness.details(sid) == ["tier inactivity 120 s, last event assistant.turn_start"]
    assert 120 <= harness.clock.now() <= 121.5
    assert harness.manager.view(sid).status is SessionStatus.STUCK
    assert "Session appears stuck" in harness.texts(sid)


async def test_dead_send_gets_one_abort_then_the_session_is_usable(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!dead-send")
    await harness.until_rest(sid)
    aborts = [(t, d) for t, _, a, d in harness.actions if a == "abort"]
    assert len(aborts) == 1 and "has not started on the prompt" in aborts[0][1]["reason"]
    assert aborts[0][0] == pytest.approx(120, abs=1)
    assert harness.outcomes(sid)[0][0] == "aborted"
    await harness.manager.send(sid, "and now?")
    await harness.until_rest(sid)
    assert harness.outcomes(sid)[-1] == ("completed", "session.idle")


async def test_model_hang_is_stuck_at_120s_and_recoverable(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!hang")
    await harness.until_rest(sid)
    assert harness.outcomes(sid)[0][0] == "stuck"
    await harness.manager.send(sid, "try again")
    await harness.until_rest(sid)
    assert harness.outcomes(sid)[-1][0] == "completed"


async def test_nine_minute_tool_is_not_killed(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!long-tool")
    await harness.until_rest(sid)
    assert harness.outcomes(sid) == [("completed", "session.idle")]
    assert harness.clock.now() > 540


async def test_tool_hung_forever_gets_one_escalation_then_is_stuck(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!tool-hang")
    await harness.until_rest(sid)
    [(outcome, reason)] = harness.outcomes(sid)
    assert outcome == "stuck" and reason == "no activity for 11 min (running bash)"
    assert harness.clock.now() == pytest.approx(600 + 60, abs=1)
    tool = next(i for i in harness.manager.history(sid) if i.kind.value == "tool")
    assert tool.tool_status == "interrupted"


async def test_permission_request_pauses_the_watchdog_until_answered(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "please write notes")
    await harness.until(lambda: harness.manager.view(sid).pending_permission is not None)
    view = harness.manager.view(sid)
    assert view.status is SessionStatus.AWAITING_PERMISSION
    assert [o[0] for o in view.pending_permission.options] == ["allow_once", "allow_always", "reject_once"]
    await harness.clock.advance(5_000)  # the user went for lunch: not "stuck"
    assert harness.manager.view(sid).status is SessionStatus.AWAITING_PERMISSION
    await harness.manager.answer_permission(sid, view.pending_permission.request_id, ALLOW_ONCE)
    await harness.until_rest(sid)
    assert harness.outcomes(sid) == [("completed", "session.idle")]
    assert "notes.txt` written" in harness.texts(sid)


@pytest.mark.parametrize("policy,expect", [("allow", "written"), ("deny", "did not write")])
async def test_permission_policy_answers_without_asking(make_harness, policy: str, expect: str) -> None:
    harness = make_harness(permission_policy=policy)
    sid = await harness.new()
    await harness.manager.send(sid, "please write notes")
    await harness.until_rest(sid)
    assert expect in harness.texts(sid)


async def test_stop_mid_stream_keeps_text_and_leaves_a_usable_session(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!slow")
    await harness.clock.advance(5)
    streamed = harness.manager.streaming_text(sid)
    assert streamed
    await harness.manager.stop(sid)
    assert harness.outcomes(sid) == [("aborted", "stopped by user")]
    assert harness.manager.view(sid).status is SessionStatus.STOPPED
    assistant = [i for i in harness.manager.history(sid) if i.kind.value == "assistant"]
    assert assistant[-1].text == streamed and assistant[-1].interrupted
    await harness.manager.send(sid, "hi")
    await harness.until_rest(sid)
    assert harness.outcomes(sid)[-1][0] == "completed"


async def test_stop_answers_a_pending_permission_and_double_stop_is_harmless(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "please write notes")
    await harness.until(lambda: harness.manager.view(sid).pending_permission is not None)
    await harness.manager.stop(sid)
    await harness.manager.stop(sid)
    await harness.until_rest(sid)
    assert harness.outcomes(sid) == [("aborted", "stopped by user")]
    assert harness.manager.view(sid).pending_permission is None


async def test_reconnect_keeps_history_and_uses_the_reconnect_tier(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "hi")
    await harness.until_rest(sid)
    before = harness.manager.history(sid)
    result = await harness.manager.reconnect(sid)
    assert result.resumed and harness.manager.history(sid)[: len(before)] == before
    sent_at = harness.clock.now()
    await harness.manager.send(sid, "!dead-send")  # nothing at all comes back
    await harness.until_rest(sid)
    aborts = [t for t, _, a, _ in harness.actions if a == "abort"]
    assert aborts and aborts[0] - sent_at == pytest.approx(35, abs=1)  # the reconnect tier, not 120 s


async def test_reconnect_during_a_turn_ends_it_and_reconnects(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "!slow")
    await harness.clock.advance(3)
    await harness.manager.reconnect(sid)
    assert harness.outcomes(sid)[0][0] == "aborted"
    assert harness.manager.session(sid).connected


async def test_prompt_sent_while_busy_is_queued_then_sent(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "hello")
    assert await harness.manager.send(sid, "second one") == "queued"
    await harness.until_rest(sid)
    await harness.until_rest(sid)
    assert [o for o, _ in harness.outcomes(sid)] == ["completed", "completed"]
    assert [t.prompt for t in harness.manager.session(sid).turns] == ["hello", "second one"]
    assert harness.manager.view(sid).queue == ()


async def test_three_consecutive_stuck_turns_suggest_a_new_session(harness: Harness) -> None:
    sid = await harness.new()
    for _ in range(3):
        await harness.manager.send(sid, "!hang")
        await harness.until_rest(sid)
    assert harness.manager.view(sid).consecutive_stuck == 3
    assert "failed to respond 3 times consecutively" in harness.texts(sid)


@pytest.mark.expect_errors(r"watchdog failed for s1\nRuntimeError: boom")
async def test_watchdog_crash_never_leaves_a_turn_processing(harness: Harness, monkeypatch) -> None:
    import polypilot_tui.engine.watchdog_timer as manager_module

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    sid = await harness.new()
    monkeypatch.setattr(manager_module, "decide", broken)
    await harness.manager.send(sid, "!hang")
    await harness.until_rest(sid)
    [(outcome, reason)] = harness.outcomes(sid)
    assert outcome == "failed" and "internal error in session monitoring" in reason


async def test_reject_is_reported_and_turn_completes(harness: Harness) -> None:
    sid = await harness.new()
    await harness.manager.send(sid, "please write notes")
    await harness.until(lambda: harness.manager.view(sid).pending_permission is not None)
    request = harness.manager.view(sid).pending_permission
    await harness.manager.answer_permission(sid, request.request_id, REJECT_ONCE)
    await harness.until_rest(sid)
    assert "did not write" in harness.texts(sid)
    tool = next(i for i in harness.manager.history(sid) if i.kind.value == "tool")
    assert tool.tool_status == "rejected"


async def test_twenty_sessions_faulting_at_once_all_end(harness: Harness) -> None:
    faults = ["!zero-idle", "!hang", "!usage-flood", "!dead-send", "!hang-after-final-tool"] * 4
    sids = [await harness.new() for _ in faults]
    for sid, prompt in zip(sids, faults, strict=True):
        await harness.manager.send(sid, prompt)
    for sid in sids:
        await harness.until_rest(sid)
    for sid in sids:
        assert not harness.busy(sid) and harness.manager.session(sid).turns


async def test_tool_rows_left_running_by_a_killed_app_are_settled_on_restore(fake_clock) -> None:
    """Not mid-turn: closed as interrupted at once. Mid-turn: a late completion updates the same row."""
    from polypilot_tui.agents.base import NullBackend
    from polypilot_tui.config import Settings, load_agents
    from polypilot_tui.domain.chat import ChatItem, ItemKind
    from polypilot_tui.domain.events import AgentEvent, EventType
    from polypilot_tui.domain.session import Session
    from polypilot_tui.engine.manager import SessionManager

    backends: dict[str, NullBackend] = {}

    def factory(agent, sink, workdir):
        backends[workdir.name] = NullBackend(sink)
        return backends[workdir.name]

    settings = Settings.read(None, record=False)
    manager = SessionManager(settings, load_agents(None), fake_clock, backend_factory=factory)

    def restored(sid: str) -> Session:
        return Session(
            sid,
            sid,
            "demo",
            agent_session_id="agent-1",
            history=[
                ChatItem(ItemKind.USER, "build it", 0.0),
                ChatItem(
                    ItemKind.TOOL,
                    "",
                    0.0,
                    tool_call_id="t1",
                    tool_name="bash",
                    tool_status="running",
                    tool_detail="make",
                ),
            ],
        )

    manager.adopt(restored("idle"))
    assert manager.history("idle")[1].tool_status == "interrupted"

    manager.adopt(restored("busy"), mid_turn_prompt="build it")
    await fake_clock.settle()
    backends["busy"].sink(
        AgentEvent(EventType.TOOL_COMPLETE, {"toolCallId": "t1", "success": True, "result": {"content": "built"}})
    )
    rows = [i for i in manager.history("busy") if i.kind is ItemKind.TOOL]
    assert [(r.tool_status, r.text) for r in rows] == [("completed", "built")]
    backends["busy"].sink(AgentEvent(EventType.SESSION_IDLE, {}))
    assert manager.view("busy").last_outcome == "completed"


async def test_stop_is_stopped_even_when_the_agent_finishes_the_turn_as_its_prompt_is_cancelled(fake_clock) -> None:
    """The Copilot CLI carries on after a cancelled permission and may end the turn itself
    while Stop is still answering: Stop must still read "stopped", never "idle"."""
    from polypilot_tui.agents.base import NullBackend
    from polypilot_tui.config import Settings, load_agents
    from polypilot_tui.domain.events import AgentEvent, EventType
    from polypilot_tui.engine.manager import SessionManager

    class FinishesOnCancel(NullBackend):
        async def answer_permission(self, request_id: str, option_id: str) -> None:
            self.sink(
                AgentEvent(
                    EventType.PERMISSION_COMPLETED,
                    {"requestId": request_id, "result": {"kind": "denied-interactively-by-user"}},
                )
            )
            self.sink(AgentEvent(EventType.MESSAGE, {"messageId": "m2", "content": "ok, I will not run it"}))
            self.sink(AgentEvent(EventType.TURN_END, {}))
            self.sink(AgentEvent(EventType.SESSION_IDLE, {}))

    backends: list[FinishesOnCancel] = []

    def factory(agent, sink, workdir):
        backends.append(FinishesOnCancel(sink))
        return backends[-1]

    manager = SessionManager(
        Settings.read(None, record=False),
        load_agents(None),
        fake_clock,  # type: ignore[call-arg]
        backend_factory=factory,
    )
    sid = await manager.create_session("demo")
    await manager.send(sid, "write a file")
    backends[0].sink(AgentEvent(EventType.TURN_START, {}))
    backends[0].sink(AgentEvent(EventType.PERMISSION_REQUESTED, {"requestId": "r1", "title": "Run bash"}))
    assert manager.view(sid).pending_permission is not None
    await manager.stop(sid)
    assert manager.view(sid).status is SessionStatus.STOPPED
    assert [t.outcome.value for t in manager.session(sid).turns] == ["aborted"]


@pytest.mark.expect_errors(r"demo script failed\nRuntimeError: a script's bug")
async def test_a_bug_in_a_demo_script_is_logged_in_full_and_ends_the_turn_visibly(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(agent: object, prompt: str) -> None:
        raise RuntimeError("a script's bug")

    monkeypatch.setitem(SCRIPTS.scripts, "chat", broken)
    sid = await harness.new()
    await harness.manager.send(sid, "!chat")
    await harness.until_rest(sid)
    [(outcome, reason)] = harness.outcomes(sid)
    assert outcome == "failed" and "a script's bug" in harness.texts(sid)


@pytest.mark.parametrize(
    "sandbox,folder,written",
    [
        (Sandbox(SandboxMode.WORKSPACE), "inside", True),  # approved: it writes notes.txt in its folder
        (NO_SANDBOX, "inside", False),  # not sandboxed: asked
        (Sandbox(SandboxMode.WORKSPACE), "", False),  # no folder to place it in: asked
    ],
)
async def test_allow_in_sandbox_answers_only_a_sandboxed_session_inside_its_folder(
    make_harness, tmp_path, sandbox: Sandbox, folder: str, written: bool
) -> None:
    harness = make_harness(permission_policy="allow-in-sandbox")
    sid = await harness.new()
    session = harness.manager.session(sid)
    session.sandbox, session.cwd = sandbox, str(tmp_path) if folder else ""
    await harness.manager.send(sid, "please write notes")
    if written:
        await harness.until_rest(sid)
        assert "notes.txt` written" in harness.texts(sid)
    else:
        await harness.until(lambda: harness.manager.view(sid).pending_permission is not None)
        await harness.clock.advance(60)
        assert harness.manager.view(sid).status is SessionStatus.AWAITING_PERMISSION


@pytest.mark.parametrize(
    "policy,sandboxed,attempt,outcome",
    [
        ("ask", True, "g1", "written"),  # a sandboxed fan-out's attempt: allow-in-sandbox
        ("ask", False, "g1", "asked"),  # an attempt not sandboxed: as the user's policy
        ("ask", True, "", "asked"),  # sandboxed, not an attempt: as the user's policy
        ("deny", True, "g1", "did not write"),  # never widened: deny stays deny
    ],
)
async def test_a_sandboxed_fan_out_attempt_approves_inside_its_worktree_by_default(
    make_harness, tmp_path, policy: str, sandboxed: bool, attempt: str, outcome: str
) -> None:
    harness = make_harness(permission_policy=policy)
    sid = await harness.new()
    session = harness.manager.session(sid)
    session.cwd, session.attempt_of = str(tmp_path), attempt
    session.sandbox = Sandbox(SandboxMode.WORKSPACE) if sandboxed else NO_SANDBOX
    await harness.manager.send(sid, "please write notes")
    if outcome == "asked":
        await harness.until(lambda: harness.manager.view(sid).pending_permission is not None)
    else:
        await harness.until_rest(sid)
        assert outcome in harness.texts(sid)


@pytest.mark.parametrize("policy", ["allow", "deny", "allow-in-sandbox"])
async def test_a_request_the_policy_answers_is_never_shown_as_waiting(make_harness, tmp_path, policy: str) -> None:
    """A headless run puts a waiting request to its user (or refuses it): one the policy is
    answering must never look like it waits, not even between the event and the answer."""
    from polypilot_tui.domain.records import ViewChanged

    harness = make_harness(permission_policy=policy)
    sid = await harness.new()
    session = harness.manager.session(sid)
    session.cwd, session.sandbox = str(tmp_path), Sandbox(SandboxMode.WORKSPACE)
    seen: list[str] = []
    harness.manager.subscribe(
        lambda change: (
            seen.append(change.session_id)
            if harness.manager.view(change.session_id).pending_permission is not None
            else None
        ),
        ViewChanged,
    )
    await harness.manager.send(sid, "please write notes")
    await harness.until_rest(sid)
    assert harness.outcomes(sid) == [("completed", "session.idle")] and seen == []
