"""The chaos scenarios: each runs one fault on one driver and returns a matrix row.

Every scenario checks the same three things: the fault turn ends the way the driver
expects and within its bound (no turn processing past its tier, checked all along by the
rig), nothing streamed before the fault is missing from history, and the session is
usable afterwards (a follow-up prompt completes).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from polypilot_tui.agents.base import AgentBackend, BackendError
from polypilot_tui.domain.text import one_line
from tests.chaos.drivers import Driver, Expect
from tests.chaos.matrix import Row
from tests.chaos.rig import Rig

SIMPLE = (
    "zero-idle",
    "hang-after-final-tool",
    "model-hang",
    "dead-send",
    "usage-flood",
    "long-tool",
    "tool-hang",
    "permission-loss",
)


@dataclass
class Outcome:
    """What happened to the fault turn, before any assertion."""

    rig: Rig
    sid: str
    outcomes: list[str]
    seconds: float
    reason: str
    expect: Expect | None
    usable: bool | None = None
    lost: list[str] = field(default_factory=list)
    note: str = ""
    problems: list[str] = field(default_factory=list)
    """Scenario-specific failures, asserted after the row is recorded."""

    def row(self, scenario: str, driver: Driver) -> Row:
        note = self.note or one_line(self.reason, 100)
        return Row(
            scenario,
            driver.name,
            "→".join(self.outcomes) or "none",
            round(self.seconds, 2),
            driver.virtual,
            self.usable,
            note,
        )


# ---- helpers ---------------------------------------------------------------------------
class Faulty:
    """A backend whose ``connect`` runs ``before`` first (to fail it, or hold it back)."""

    def __init__(self, inner: AgentBackend, before: Callable[[], Awaitable[None]]) -> None:
        self._inner = inner
        self._before = before
        self.kind = inner.kind

    async def connect(self, resume_id: str | None) -> Any:
        await self._before()
        return await self._inner.connect(resume_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def nth_connect(n: int, before: Callable[[], Awaitable[None]]) -> Callable[[AgentBackend, str], AgentBackend]:
    """Wrap the ``n``-th backend each session gets (1 = the first connect)."""
    counts: Counter[str] = Counter()

    def wrap(backend: AgentBackend, sid: str) -> AgentBackend:
        counts[sid] += 1
        return Faulty(backend, before) if counts[sid] == n else backend

    return wrap


def turns(rig: Rig, sid: str) -> int:
    return len(rig.manager.session(sid).turns)


async def settle_turns(rig: Rig, sid: str, before: int, within: float, what: str) -> None:
    await rig.until(lambda: rig.at_rest(sid) and turns(rig, sid) > before, within, what)


async def follow_up(driver: Driver, rig: Rig, sid: str) -> bool:
    """Send an ordinary prompt; True when it completes."""
    before = turns(rig, sid)
    await rig.manager.send(sid, driver.ok_prompt)
    await settle_turns(rig, sid, before, driver.ok_within, "the follow-up prompt to complete")
    return rig.outcomes(sid, before) == ["completed"]


async def until_working(rig: Rig, sid: str, within: float = 30.0) -> None:
    """Until the turn shows work: a running tool or streamed text."""

    def working() -> bool:
        turn = rig.manager.session(sid).turn
        return turn is not None and (bool(turn.active_tools) or turn.streamed_chars > 0)

    await rig.until(working, within, "the turn to start working")


def bound(driver: Driver, expect: Expect) -> float:
    return expect.within + (0.0 if driver.virtual else driver.slack + 1.0)


async def finish(driver: Driver, result: Outcome, scenario: str, follow: bool = True) -> Outcome:
    """Follow-up prompt, lost-text check; the caller records the row, then asserts."""
    result.lost = result.rig.lost_text(result.sid)
    if follow:
        try:
            result.usable = await follow_up(driver, result.rig, result.sid)
        except AssertionError:
            result.usable = False
    return result


def verify(driver: Driver, result: Outcome) -> None:
    """The matrix's assertions, after the row has been recorded."""
    expect = result.expect
    if expect is not None:
        assert result.outcomes and expect.allows(result.outcomes[0]), (
            f"fault turn ended {result.outcomes} ({result.reason}); expected {expect.outcome}"
        )
        assert expect.at_least - 1e-6 <= result.seconds <= bound(driver, expect), (
            f"resolved in {result.seconds:.2f} s; expected {expect.at_least}..{expect.within} s ({result.reason})"
        )
    assert not result.problems, result.problems
    assert not result.rig.violations, result.rig.violations
    assert not result.lost, f"streamed text missing from history: {result.lost}"
    if result.usable is not None:
        assert result.usable, (
            f"the session is not usable after the fault: {result.rig.outcomes(result.sid)}, "
            f"{result.rig.reasons(result.sid)}"
        )


# ---- scenarios ---------------------------------------------------------------------------
async def simple_fault(driver: Driver, scenario: str) -> Outcome:
    """Send the fault prompt, wait for the session to come to rest."""
    rig = driver.rig()
    sid = await driver.new_session(rig)
    expect = driver.expect[scenario]
    start = rig.now()
    await rig.manager.send(sid, driver.prompt(scenario))
    await settle_turns(rig, sid, 0, bound(driver, expect) + 5.0, f"{scenario} to end")
    result = Outcome(rig, sid, rig.outcomes(sid), rig.now() - start, rig.reasons(sid)[0], expect)
    return await finish(driver, result, scenario)


async def recovery_fails(driver: Driver, scenario: str) -> Outcome:
    """Permission loss starts a recovery whose reconnect raises (the network dropped)."""

    async def drop() -> None:
        raise BackendError("network unreachable (simulated drop during resume)")

    rig = driver.rig(wrap=nth_connect(2, drop))
    sid = await driver.new_session(rig)
    expect = driver.expect[scenario]
    start = rig.now()
    await rig.manager.send(sid, driver.prompt(scenario))
    await settle_turns(rig, sid, 0, bound(driver, expect) + 5.0, "the failed recovery to end")
    result = Outcome(rig, sid, rig.outcomes(sid), rig.now() - start, rig.reasons(sid)[0], expect)
    if "auto-recovery failed" not in result.reason:
        result.problems.append(f"the turn should fail as 'auto-recovery failed', not: {result.reason}")
    return await finish(driver, result, scenario)


async def stop_during_recovery(driver: Driver, scenario: str) -> Outcome:
    """Stop lands while the recovery's reconnect is still connecting: Stop cancels that
    connect (no agent is left starting for a stopped turn) and the next prompt reconnects."""
    gate = asyncio.Event()

    async def hold() -> None:
        await gate.wait()

    rig = driver.rig(wrap=nth_connect(2, hold))
    sid = await driver.new_session(rig)
    session = rig.manager.session(sid)
    await rig.manager.send(sid, driver.prompt(scenario))
    await rig.until(lambda: session.recovering and len(rig.backends[sid]) >= 2, 30.0, "the recovery to reconnect")
    start = rig.now()
    await rig.manager.stop(sid)
    gate.set()
    await rig.until(
        lambda: rig.at_rest(sid) and not session.connecting,
        bound(driver, driver.expect[scenario]) + 5.0,
        "the stopped recovery to settle",
    )
    seconds = rig.now() - start
    await asyncio.wait_for(rig.manager.idle(), 15.0)  # the recovery task has seen the Stop
    result = Outcome(rig, sid, rig.outcomes(sid), seconds, rig.reasons(sid)[0], driver.expect[scenario])
    if rig.outcomes(sid) != ["aborted"] or session.recovering:
        result.problems.append(f"the recovery must not end or resend after Stop: {rig.outcomes(sid)}")
    return await finish(driver, result, scenario)


async def sigkill_mid_tool(driver: Driver, scenario: str) -> Outcome:
    """The agent dies while a tool runs: the turn fails at once, the next send reconnects."""
    rig = driver.rig()
    sid = await driver.new_session(rig)
    await rig.manager.send(sid, driver.prompt(scenario))
    await rig.until(
        lambda: bool(rig.manager.session(sid).turn and rig.manager.session(sid).turn.active_tools),
        30.0,
        "a tool to run",
    )
    start = rig.now()
    if not driver.virtual:  # the demo's script crashes by itself
        await driver.kill_agent(rig, sid)
    await settle_turns(rig, sid, 0, bound(driver, driver.expect[scenario]) + 5.0, "the crash to end the turn")
    result = Outcome(rig, sid, rig.outcomes(sid), rig.now() - start, rig.reasons(sid)[0], driver.expect[scenario])
    return await finish(driver, result, scenario)


async def restart_mid_turn(driver: Driver, scenario: str) -> Outcome:
    """The app quits mid-turn; a new manager adopts the session with its prompt."""
    first = driver.rig()
    sid = await driver.new_session(first)
    prompt = driver.prompt(scenario)
    await first.manager.send(sid, prompt)
    await until_working(first, sid)
    streamed_before = list(first.streamed[sid])
    rig, sid = await driver.restart(first, sid)
    start = rig.now()
    session = rig.manager.session(sid)
    expect = driver.expect[scenario]
    await rig.until(
        lambda: rig.at_rest(sid) and bool(session.turns), bound(driver, expect) + 5.0, "the adopted turn to end"
    )
    result = Outcome(rig, sid, rig.outcomes(sid), rig.now() - start, rig.reasons(sid)[0], expect)
    offered = session.interrupted_prompt == prompt
    result.note = f"{one_line(rig.reasons(sid)[0], 80)}; resend offered: {'yes' if offered else 'NO'}"
    if not offered:
        result.problems.append("the interrupted prompt must be offered for resending")
    kept = "".join(i.text for i in session.history)
    result.problems += [f"lost across the restart: {p!r}" for p in streamed_before if p not in kept]
    return await finish(driver, result, scenario)


async def double_stop(driver: Driver, scenario: str) -> Outcome:
    rig = driver.rig()
    sid = await driver.new_session(rig)
    await rig.manager.send(sid, driver.prompt(scenario))
    await until_working(rig, sid)
    start = rig.now()
    await asyncio.gather(rig.manager.stop(sid), rig.manager.stop(sid))
    await settle_turns(rig, sid, 0, bound(driver, driver.expect[scenario]) + 5.0, "Stop to end the turn")
    result = Outcome(rig, sid, rig.outcomes(sid), rig.now() - start, rig.reasons(sid)[0], driver.expect[scenario])
    if rig.outcomes(sid) != ["aborted"]:
        result.problems.append(f"two Stops end exactly one turn: {rig.outcomes(sid)}")
    return await finish(driver, result, scenario)


async def reconnect_during_turn(driver: Driver, scenario: str) -> Outcome:
    rig = driver.rig()
    sid = await driver.new_session(rig)
    await rig.manager.send(sid, driver.prompt(scenario))
    await until_working(rig, sid)
    start = rig.now()
    reconnect = asyncio.ensure_future(rig.manager.reconnect(sid))
    await settle_turns(rig, sid, 0, bound(driver, driver.expect[scenario]) + 5.0, "Reconnect to end the turn")
    result = Outcome(rig, sid, rig.outcomes(sid), rig.now() - start, rig.reasons(sid)[0], driver.expect[scenario])
    connect = await asyncio.wait_for(reconnect, driver.connect_within)
    result.note = f"{rig.reasons(sid)[0]}; reconnected ({connect.how}) after {rig.now() - start:.1f} s"
    if not rig.manager.session(sid).connected:
        result.problems.append("not connected after Reconnect")
    return await finish(driver, result, scenario)


async def twenty_sessions(driver: Driver, scenario: str) -> Outcome:
    """20 sessions, the driver's simple faults round-robin, all sent at once."""
    rig = driver.rig()
    faults = [f for f in SIMPLE if f in driver.prompts and f != "permission-loss"]
    plan = [faults[i % len(faults)] for i in range(20)]
    sids = list(await asyncio.gather(*[driver.new_session(rig) for _ in plan]))
    start = rig.now()
    await asyncio.gather(*[rig.manager.send(sid, driver.prompt(fault)) for sid, fault in zip(sids, plan, strict=True)])
    limit = max(bound(driver, driver.expect[f]) for f in faults) + 10.0
    await rig.until(lambda: all(rig.at_rest(s) and turns(rig, s) for s in sids), limit, "all 20 sessions to end")
    seconds = rig.now() - start
    wrong = [
        (s, f, rig.outcomes(s), rig.reasons(s))
        for s, f in zip(sids, plan, strict=True)
        if not driver.expect[f].allows(rig.outcomes(s)[0])
    ]
    lost = [piece for s in sids for piece in rig.lost_text(s)]
    counts = Counter(rig.outcomes(s)[0] for s in sids)
    followed = await asyncio.gather(*[follow_up(driver, rig, s) for s in sids], return_exceptions=True)
    usable = sum(1 for f in followed if f is True)
    unusable = [
        (s, f, rig.outcomes(s), rig.reasons(s)[1:], o)
        for s, f, o in zip(sids, plan, followed, strict=True)
        if o is not True
    ]
    summary = " ".join(f"{k}×{v}" for k, v in sorted(counts.items()))
    result = Outcome(
        rig,
        sids[0],
        [summary],
        seconds,
        "",
        None,
        usable=usable == len(sids),
        lost=lost,
        note=f"{len(faults)} faults round-robin; {usable}/20 usable after",
    )
    result.problems += [f"{s} ({f}) ended {o}: {r}" for s, f, o, r in wrong]
    result.problems += [f"{s} ({f}) not usable after: {o} {r} {e!r}" for s, f, o, r, e in unusable]
    return result


SCENARIO_RUNNERS: dict[str, Callable[[Driver, str], Awaitable[Outcome]]] = {
    **dict.fromkeys(SIMPLE, simple_fault),
    "recovery-fails": recovery_fails,
    "stop-during-recovery": stop_during_recovery,
    "sigkill-mid-tool": sigkill_mid_tool,
    "restart-mid-turn": restart_mid_turn,
    "double-stop": double_stop,
    "reconnect-during-turn": reconnect_during_turn,
    "twenty-sessions": twenty_sessions,
}
