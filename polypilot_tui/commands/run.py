"""``polypilot run``: one session, one turn, same engine and watchdog — for CI jobs.

The run drives an engine in this process (nothing saved) through the one front door the
dashboard uses, :meth:`LocalEngine.call <polypilot_tui.engine.local.LocalEngine.call>`.

A hung agent must never hang the job: the watchdog ends the turn, the exit code says how
it ended, and the agent is shut down on the way out. Agent text reaches the terminal the
way the dashboard shows it: terminal control sequences stripped (an agent must not set the
clipboard or the window title), invalid text replaced, never raw. A run's session folder is
removed when its turn completed; a failed run's is kept (and named) for diagnosis. Exit codes:

- 0 the turn completed and every permission it asked for was granted;
- 1 it did not complete (stuck, failed, the agent died);
- 2 usage (no such agent, bad settings);
- 3 it completed, but a permission it needed was refused (the tool did not run);
- 4 it was cancelled (ctrl+c / SIGTERM, or the agent cancelled it);
- 141 stdout was closed (``| head``): the turn is stopped and the run ends quietly.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import structs

from polypilot_tui.agents.head_start import head_start
from polypilot_tui.agents.readiness import readiness
from polypilot_tui.commands.output import say
from polypilot_tui.config import ASKS_NOBODY, AgentCatalog, AgentConfig, PermissionPolicy, Settings

if TYPE_CHECKING:
    from polypilot_tui.agents.head_start import EarlyCli
    from polypilot_tui.commands.output import Output
    from polypilot_tui.domain.chat import ChatItem, TurnRecord
    from polypilot_tui.domain.failures import Failure
    from polypilot_tui.domain.records import Record
    from polypilot_tui.domain.sandbox import Sandbox
    from polypilot_tui.domain.turn import Outcome, PermissionPrompt
    from polypilot_tui.engine.local import LocalEngine

EXIT_OK = 0
EXIT_NOT_COMPLETED = 1
EXIT_USAGE = 2
EXIT_PERMISSION_REFUSED = 3
EXIT_CANCELLED = 4
COLLECT_AFTER_SECONDS = 10.0
"""Seconds after which a run collects garbage again even if its agent has not connected (a
start without collections is for a start: entry.py)."""


async def run_headless(
    settings: Settings,
    catalog: AgentCatalog,
    agent: str,
    prompt: str,
    *,
    json_mode: bool = False,
    allow_tools: bool = False,
    sandbox: Sandbox | None = None,
    early: EarlyCli | None = None,
) -> int:
    """Run one turn; exit 0 when it completed, 1 (reason on stderr) when it did not. ``sandbox``
    None: the agent's own (its ``sandbox`` in the agents file). ``early``: the CLI entry.py
    started from the raw settings, taken only if it is exactly this run's (killed otherwise)."""
    try:
        return await _checked(
            settings, catalog, agent, prompt, json_mode=json_mode, allow_tools=allow_tools, sandbox=sandbox, early=early
        )
    finally:
        if early is not None:
            early.discard()  # refused, or sandboxed: it was never sent anything (a no-op once taken)


async def _checked(
    settings: Settings,
    catalog: AgentCatalog,
    agent: str,
    prompt: str,
    *,
    json_mode: bool,
    allow_tools: bool,
    sandbox: Sandbox | None,
    early: EarlyCli | None,
) -> int:
    """The run's checks, its head start, then the run."""
    if agent not in catalog.agents:
        say(f"polypilot run: {catalog.missing(agent)}", err=True)
        return EXIT_USAGE
    if cannot := readiness(catalog.agents[agent]).cannot_start:  # said now, not as a 401 much later
        say(f"polypilot run: agent {agent!r} cannot start: {cannot}", err=True)
        return EXIT_USAGE
    if allow_tools:
        settings = structs.replace(settings, permission_policy=PermissionPolicy.ALLOW)
    # The agent boots (and the Copilot SDK connects to it) while the rest of the run loads:
    # only what the checks above need is imported before this line (a test holds the list).
    config = catalog.agents[agent]
    if sandbox is not None:  # a network rule counts: refused below without the sandbox, never run as none
        sandboxed = sandbox.on or sandbox.network is not None
    else:
        sandboxed = config.sandbox != "off" or config.network is not None
    if sandboxed and (unsandboxable := _sandbox_problem(sandbox, config)):  # said now, as a missing agent is
        say(f"polypilot run: agent {agent!r} cannot start sandboxed: {unsandboxable}", err=True)
        return EXIT_USAGE
    # A sandboxed agent starts in its sandbox, in the session: no head start outside it, and
    # an early CLI (started outside it: the files changed since) is killed before the session starts.
    if sandboxed and early is not None:
        early.discard()
    release_head_start = _no_head_start if sandboxed else head_start(config, early)
    try:
        return await _run(settings, catalog, agent, prompt, json_mode=json_mode, sandbox=sandbox)
    finally:
        await release_head_start()  # the session holds the agent by now, or no one needs it


def refusal_line(item: ChatItem) -> str | None:
    """What a live tool row replaced as refused by the sandbox adds to ``run``'s and
    ``follow``'s output (its completion, read before the row, printed "[tool ok]": a shell
    that ran and exited 1); None for any other row."""
    from polypilot_tui.domain.chat import TOOL_REFUSED, TOOL_STATUS_WORDS, ItemKind
    from polypilot_tui.domain.text import strip_control

    if item.kind is ItemKind.TOOL and item.tool_status == TOOL_REFUSED:
        return f"[tool {strip_control(item.tool_name)}] {TOOL_STATUS_WORDS[TOOL_REFUSED]}"
    return None


def _sandbox_problem(asked: Sandbox | None, config: AgentConfig) -> str | None:
    """Why the run's sandbox (``asked``, else the agent's) cannot start here (imported only
    for a sandboxed run)."""
    from polypilot_tui.agents.sandbox import sandbox_problem
    from polypilot_tui.domain.sandbox import chosen

    return sandbox_problem(chosen(asked, config.sandbox, config.network))  # as the engine will choose it


async def _no_head_start() -> None:
    """Nothing to release: no agent was started ahead."""


async def _run(
    settings: Settings, catalog: AgentCatalog, agent: str, prompt: str, *, json_mode: bool, sandbox: Sandbox | None
) -> int:
    """The run itself, once its agent has been started."""
    from polypilot_tui.commands.interrupts import on_interrupt
    from polypilot_tui.commands.output import EXIT_STDOUT_CLOSED, Output
    from polypilot_tui.domain.events import EventType
    from polypilot_tui.domain.records import EventReceived, ItemReplaced, TurnEnded, ViewChanged
    from polypilot_tui.domain.safe_json import dump_json
    from polypilot_tui.domain.text import strip_control
    from polypilot_tui.domain.turn import Outcome
    from polypilot_tui.engine import verbs
    from polypilot_tui.engine.builder import build_engine
    from polypilot_tui.infra.collector import started
    from polypilot_tui.storage.retention import prune_state_dir

    for stream in (sys.stdout, sys.stderr):  # text that is not valid Unicode is shown replaced, never a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    prune_state_dir(Path(settings.state_dir))
    engine = build_engine(settings, catalog, persist=False, counts=False)  # the run shows no change count
    done = asyncio.Event()
    sid = ""
    ended: list[TurnRecord] = []
    stderr_tail: tuple[str, ...] = ()
    failure: Failure | None = None
    workdir = ""

    def turn_running() -> bool:
        return bool(sid) and not ended

    def stop_turn() -> None:
        loop.create_task(engine.call(verbs.STOP, verbs.SessionRef(sid)))

    def reader_left() -> None:
        """stdout was closed (``| head``): stop the turn (or the start) and leave quietly."""
        if turn_running():
            stop_turn()
        elif main is not None:
            main.cancel()

    out = Output(on_closed=reader_left)

    def tell(message: str) -> None:
        """A line on stderr, starting on a line of its own on a terminal both streams share."""
        say(("\n" if out.line_open else "") + message, err=True)

    def show(change: Record) -> None:
        assert isinstance(change, EventReceived)
        event = change.event
        if json_mode:  # strict JSON, every control character escaped: nothing raw reaches the terminal
            out.line(dump_json({"type": event.type, "data": dict(event.data)}, ascii_only=True))
        elif event.type == EventType.MESSAGE_DELTA:
            out.write(strip_control(event.text("deltaContent")))
        elif event.type == EventType.TOOL_START:
            arguments = strip_control(json.dumps(event.get("arguments"), ensure_ascii=False, default=str))
            out.line(f"[tool {strip_control(event.text('toolName'))}] {arguments}")
        elif event.type == EventType.TOOL_COMPLETE:
            out.line(f"[tool {'ok' if event.get('success') else 'failed'}]")

    asked: set[str] = set()

    def ask_when_asked(change: Record) -> None:
        """A request the policy left to the user (ask; allow-in-sandbox, for one it cannot
        place inside the sandbox) is put to the user, as the dashboard does."""
        if not sid or change.session_id != sid or settings.permission_policy in ASKS_NOBODY:
            return
        prompt = engine.view(sid).pending_permission
        if prompt is not None and prompt.request_id not in asked:
            asked.add(prompt.request_id)
            asyncio.get_running_loop().create_task(_ask(engine, sid, prompt, out))

    def turn_ended(change: Record) -> None:
        assert isinstance(change, TurnEnded)
        if change.session_id == sid and not ended:
            ended.append(change.record)
            done.set()

    def refused(change: Record) -> None:
        assert isinstance(change, ItemReplaced)
        if change.session_id == sid and not json_mode and (line := refusal_line(change.item)) is not None:
            out.line(line)

    engine.subscribe(show, EventReceived)
    engine.subscribe(refused, ItemReplaced)
    engine.subscribe(ask_when_asked, ViewChanged)
    engine.subscribe(turn_ended, TurnEnded)
    interrupted: list[str] = []
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    out.watch_reader(loop)  # a reader that leaves while the turn is quiet is noticed too

    def cancel(signame: str) -> None:
        """First ctrl+c / SIGTERM: stop the turn (abort, grace, kill); a second one: leave now."""
        first = not interrupted
        interrupted.append(signame)
        if first and turn_running():
            tell(f"polypilot run: {signame}: stopping the turn (again to quit at once)")
            stop_turn()
        elif main is not None:
            main.cancel()  # the finally below still closes the agent

    # An agent that never answers holds the connect until its backend's own timeouts (minutes):
    # collections come back on after a start's length whatever the agent does.
    loop.call_later(COLLECT_AFTER_SECONDS, started)
    try:
        with on_interrupt(cancel):  # not during the close below: it is not cut short
            sid = await engine.call(verbs.NEW_SESSION, verbs.NewSession(agent, sandbox=sandbox))
            await engine.call(verbs.SEND, verbs.Send(sid, prompt))
            started()  # everything is imported and the agent connected: collections from here on
            await done.wait()
            record = ended[0]
            failure = engine.view(sid).failure
    except asyncio.CancelledError:
        if out.closed:
            return EXIT_STDOUT_CLOSED
        tell(f"polypilot run: cancelled by {interrupted[-1] if interrupted else 'a signal'}")
        return EXIT_CANCELLED
    except Exception as exc:  # noqa: BLE001 - the job gets a reason, not a traceback
        tell(f"polypilot run: {strip_control(str(exc))}")
        return EXIT_NOT_COMPLETED
    finally:
        completed = bool(ended) and ended[0].outcome is Outcome.COMPLETED
        if sid:
            details = await engine.call(verbs.DETAILS, verbs.SessionRef(sid))
            stderr_tail, workdir = details.stderr_tail, details.state_folder
            await engine.call(verbs.CLOSE, verbs.SessionRef(sid))
        await engine.close(quitting=False)  # turns in flight stay on record: the run says how they went
        if completed:  # a failed run keeps its agent logs for diagnosis (pruned by the retention rule)
            shutil.rmtree(workdir, ignore_errors=True)
    code, verdict = exit_code(record.outcome, strip_control(record.reason), record.refused, interrupted)
    if json_mode:
        out.line(
            dump_json(
                {
                    "turn_end": record.outcome.value,
                    "reason": record.reason,
                    "refused_permissions": list(record.refused),
                    "exit_code": code,
                },
                ascii_only=True,
            )
        )
    else:
        out.end_line()
    if out.closed:  # the reader left: the turn was stopped for that; nothing more to say
        return EXIT_STDOUT_CLOSED
    if verdict:
        kept = "" if completed else f" (agent logs kept in {workdir})"
        say(f"polypilot run: {verdict}{kept}", err=True)
    if failure is not None and code != EXIT_OK:  # the failure by its name, with the fix in words
        say(f"polypilot run: {failure.title} — fix: {failure.fix}", err=True)
    if code != EXIT_OK and stderr_tail:
        lines = "\n".join(f"  {strip_control(line)}" for line in stderr_tail[-10:])
        say(f"polypilot run: the agent's last lines on stderr:\n{lines}", err=True)
    return code


def exit_code(outcome: Outcome, reason: str, refused: tuple[str, ...], interrupted: list[str]) -> tuple[int, str]:
    """The exit code of a run and the sentence that explains it ("" for a clean success)."""
    from polypilot_tui.domain.turn import Outcome

    if outcome is Outcome.COMPLETED:
        if refused:
            titles = "; ".join(refused[:3]) + (f" (+{len(refused) - 3} more)" if len(refused) > 3 else "")
            return EXIT_PERMISSION_REFUSED, (
                f"the turn completed, but {len(refused)} permission request"
                f"{'s were' if len(refused) > 1 else ' was'} refused: {titles}"
            )
        return EXIT_OK, ""
    if outcome is Outcome.ABORTED:
        why = f"cancelled by {interrupted[0]}" if interrupted else f"cancelled: {reason}"
        return EXIT_CANCELLED, f"turn {why}"
    return EXIT_NOT_COMPLETED, f"turn {outcome.value}: {reason}"


async def _ask(engine: LocalEngine, session_id: str, prompt: PermissionPrompt, out: Output) -> None:
    """Ask on the terminal when there is one; otherwise refuse (the policy left it to the user)."""
    from polypilot_tui.agents.base import ALLOW_ONCE, REJECT_ONCE
    from polypilot_tui.domain.text import strip_control
    from polypilot_tui.engine import verbs

    title = strip_control(prompt.title)
    if sys.stdin.isatty():
        out.end_line()
        answer = await asyncio.to_thread(input, f"Allow {title}? [y/N] ")
        out.line_open = False  # the answer's Enter ended the line
        choice = ALLOW_ONCE if answer.strip().lower() in ("y", "yes") else REJECT_ONCE
    else:
        say(
            ("\n" if out.line_open else "") + f"polypilot run: permission requested ({title}), the policy leaves "
            "it to you and there is no terminal; rejected. Use --allow-tools or POLYPILOT_PERMISSION_POLICY=allow.",
            err=True,
        )
        choice = REJECT_ONCE
    await engine.call(verbs.ANSWER_PERMISSION, verbs.AnswerPermission(session_id, prompt.request_id, choice))
