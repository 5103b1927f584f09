"""``polypilot run --fan-out copilot:2,opencode:1 "task"``: one task tried by several agents at
once, each in a new worktree of the repository, headless — for CI jobs and scripts.

The run drives an engine in this process (nothing saved) through its FAN_OUT verb, waits for
every attempt's turn to end (each ended by its agent or by the watchdog: a hung agent never
hangs the job), runs the check command in each worktree when its attempt ends, and prints one
JSON summary on stdout. The worktrees and their branches are kept (the summary names them):
merge the best with git. No permission prompt can be answered here: with the policy ``ask``
every request is refused (said on stderr); ``--allow-tools`` allows them. Exit codes:

- 0 every attempt completed (and passed the check, when one was given);
- 1 an attempt did not complete (stuck, failed, its agent died, a turn was refused);
- 2 usage (a fan-out written wrong, an unknown agent or one that cannot start here, not a git
  folder, a bad check): nothing was made;
- 3 every attempt completed, but a permission one needed was refused (the tool did not run);
- 4 cancelled (ctrl+c / SIGTERM: every attempt's turn is stopped);
- 5 every attempt completed, but the check failed in at least one.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from msgspec import structs

from polypilot_tui.agents.base import REJECT_ONCE
from polypilot_tui.agents.readiness import readiness
from polypilot_tui.commands.interrupts import on_interrupt
from polypilot_tui.commands.output import say
from polypilot_tui.config import ASKS_NOBODY, AgentCatalog, PermissionPolicy, Settings
from polypilot_tui.domain.fan_out import CHECK_TIMEOUT, Comparison, FanOutSpecError, parse_fan_out
from polypilot_tui.domain.records import Record, TurnEnded, ViewChanged
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.sandbox import Sandbox
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.turn import Outcome
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.codec import encode
from polypilot_tui.engine.local import LocalEngine

EXIT_OK = 0
EXIT_NOT_COMPLETED = 1
EXIT_USAGE = 2
EXIT_PERMISSION_REFUSED = 3
EXIT_CANCELLED = 4
EXIT_CHECK_FAILED = 5


def tell(message: str) -> None:
    say(f"polypilot run: {message}", err=True)


def usage_problem(catalog: AgentCatalog, spec: str) -> tuple[tuple[str, ...], str]:
    """The agents of ``spec``, one per attempt, or what is wrong with it ("" when nothing)."""
    try:
        agents = parse_fan_out(spec)
    except FanOutSpecError as exc:
        return (), f"--fan-out {exc}"
    for agent in dict.fromkeys(agents):
        if agent not in catalog.agents:
            return (), catalog.missing(agent)
        if cannot := readiness(catalog.agents[agent]).cannot_start:
            return (), f"agent {agent!r} cannot start: {cannot}"
    return agents, ""


async def run_fan_out(
    settings: Settings,
    catalog: AgentCatalog,
    spec: str,
    task: str,
    *,
    folder: str = ".",
    base: str = "",
    check: str = "",
    check_timeout: float = CHECK_TIMEOUT,
    allow_tools: bool = False,
    sandbox: Sandbox | None = None,
) -> int:
    """Fan the task out, wait for every attempt, print the summary; the exit code."""
    agents, problem = usage_problem(catalog, spec)
    if problem:
        tell(problem)
        return EXIT_USAGE
    if allow_tools:
        settings = structs.replace(settings, permission_policy=PermissionPolicy.ALLOW)
    engine = build_engine(settings, catalog, persist=False)
    changed = asyncio.Event()
    refused: set[str] = set()
    loop = asyncio.get_running_loop()
    interrupted: list[str] = []
    group = ""

    def on_change(change: Record) -> None:
        changed.set()
        if isinstance(change, ViewChanged) and settings.permission_policy not in ASKS_NOBODY:
            refuse_permission(engine, change.session_id, refused, loop)

    def cancel(signame: str) -> None:
        interrupted.append(signame)
        if len(interrupted) == 1 and group:
            tell(f"{signame}: stopping every attempt's turn (again to quit at once)")
            for sid in engine.ids():
                loop.create_task(engine.call(verbs.STOP, verbs.SessionRef(sid)))
        elif main is not None:
            main.cancel()

    main = asyncio.current_task()
    engine.subscribe(on_change, TurnEnded, ViewChanged)
    comparison: Comparison | None = None
    try:
        with on_interrupt(cancel):  # not during the close below: it is not cut short
            request = verbs.FanOut(task, agents, os.path.abspath(folder), base, check, check_timeout, sandbox)
            try:
                group = await engine.call(verbs.FAN_OUT, request)
            except EngineError as exc:
                tell(str(exc))
                return EXIT_USAGE
            while True:
                changed.clear()  # before the compare: an end while it reads is not missed
                comparison = await engine.call(verbs.COMPARE, verbs.GroupRef(group))
                if comparison.ended:
                    break
                await changed.wait()
            await engine.fan_outs.idle()  # the checks started as the attempts ended
            comparison = await engine.call(verbs.COMPARE, verbs.GroupRef(group))
    except asyncio.CancelledError:
        tell(f"cancelled by {interrupted[-1] if interrupted else 'a signal'}")
        return EXIT_CANCELLED
    finally:
        await engine.close(quitting=False)
    code = exit_code(comparison, interrupted)
    say(dump_json(summary(comparison, code), indent=2, ascii_only=True))
    for attempt in comparison.attempts:
        if attempt.outcome != Outcome.COMPLETED.value:
            tell(f"{attempt.session_id} ({attempt.agent}) {attempt.outcome}: {one_line(attempt.reason, 300)}")
    if comparison.attempts:
        tell(f"the worktrees are kept; merge the best with `git merge BRANCH` in {comparison.repo}")
    return code


def refuse_permission(engine: LocalEngine, session_id: str, refused: set[str], loop: asyncio.AbstractEventLoop) -> None:
    """The policy left a request to the user (ask; allow-in-sandbox, for one outside the
    sandbox) and nobody can be asked here: refuse, and say so once per request. One the policy
    answers is never pending (engine/turns.py notes its answer at once)."""
    if session_id not in engine.ids():
        return
    prompt = engine.view(session_id).pending_permission
    if prompt is None or prompt.request_id in refused:
        return
    refused.add(prompt.request_id)
    tell(
        f"{session_id}: permission requested ({one_line(prompt.title, 200)}) but the policy leaves it to you and a "
        "fan-out asks nobody; rejected. Use --allow-tools or POLYPILOT_PERMISSION_POLICY=allow."
    )
    answer = verbs.AnswerPermission(session_id, prompt.request_id, REJECT_ONCE)
    loop.create_task(engine.call(verbs.ANSWER_PERMISSION, answer))


def exit_code(comparison: Comparison, interrupted: list[str]) -> int:
    outcomes = [attempt.outcome for attempt in comparison.attempts]
    if interrupted:
        return EXIT_CANCELLED
    if any(outcome != Outcome.COMPLETED.value for outcome in outcomes):
        return EXIT_NOT_COMPLETED
    if any(attempt.refused for attempt in comparison.attempts):
        return EXIT_PERMISSION_REFUSED
    if comparison.check and any(a.check is None or not a.check.passed for a in comparison.attempts):
        return EXIT_CHECK_FAILED
    return EXIT_OK


def summary(comparison: Comparison, code: int) -> dict[str, Any]:
    """The JSON summary: the group, and each attempt's end, time, usage, changes and check."""
    return {
        "group": comparison.group,
        "repo": comparison.repo,
        "base": comparison.base,
        "check": comparison.check,
        "attempts": [
            {
                "session_id": a.session_id,
                "agent": a.agent,
                "branch": a.branch,
                "folder": a.folder,
                "turn_end": a.outcome,
                "reason": a.reason,
                "refused_permissions": list(a.refused),
                "seconds": a.seconds,
                "usage": a.usage.to_json(),
                "changes": encode(a.changes),
                "check": encode(a.check) if a.check is not None else None,
            }
            for a in comparison.attempts
        ],
        "exit_code": code,
    }
