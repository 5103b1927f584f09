"""``polypilot send --to A,B,C``, ``fan-out``, ``compare`` and ``pick``: many sessions at once,
against the state folder's engine (its BROADCAST, FAN_OUT, COMPARE, RUN_CHECK and PICK verbs).

``send --to`` prints a line per session (``sent``, ``queued`` or ``refused: why``) and exits 1
when any refused it (the others still got it). ``fan-out`` makes the attempts and prints the
group's id (the dashboard shows them; ``run --fan-out`` is the headless one). ``compare``
prints a fan-out's attempts side by side (``--check`` runs the check in each first); ``pick``
merges one and, with ``--discard-others``, discards the rest: work at risk is named and kept
unless ``--force``.
Agent and user text is printed stripped of terminal control sequences; ``--json`` is strict
ASCII JSON.
"""

from __future__ import annotations

import os

from polypilot_tui.commands.live import CommandFailed, run_command
from polypilot_tui.commands.output import say
from polypilot_tui.commands.resolve import NoSuchSession, pick_session
from polypilot_tui.config import Settings
from polypilot_tui.domain.fan_out import Attempt, BroadcastResult, Comparison, FanOutSpecError, parse_fan_out
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.sandbox import Sandbox
from polypilot_tui.domain.text import compact_duration, one_line
from polypilot_tui.engine import verbs
from polypilot_tui.engine.codec import encode
from polypilot_tui.service.client import EngineClient

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


def session_keys(text: str) -> tuple[str, ...]:
    """``a,b,c`` as the sessions named (ids or names), each once; CommandFailed (2) when none."""
    keys = tuple(dict.fromkeys(key.strip() for key in text.split(",") if key.strip()))
    if not keys:
        raise CommandFailed("--to names no session (write ID,ID,… or names)", EXIT_USAGE)
    return keys


async def cmd_broadcast(settings: Settings, to: str, prompt: str, *, json_mode: bool = False) -> int:
    """Send ``prompt`` to every session ``to`` names; a line (or a JSON object) per session."""

    async def body(client: EngineClient) -> int:
        keys = session_keys(to)
        listed = (await client.call(verbs.SESSIONS, verbs.NoArgs())).sessions
        named: list[str | BroadcastResult] = []  # an id, or a key no session answers to (refused here)
        for key in keys:
            try:
                named.append(pick_session(key, listed, lambda v: v.id, lambda v: v.name).id)
            except NoSuchSession as exc:
                named.append(BroadcastResult(key, "refused", str(exc)))
        ids = tuple(dict.fromkeys(n for n in named if isinstance(n, str)))
        sent = (
            {r.session_id: r for r in await client.call(verbs.BROADCAST, verbs.Broadcast(ids, prompt))} if ids else {}
        )
        results = [n if isinstance(n, BroadcastResult) else sent[n] for n in dict.fromkeys(named)]
        names = {view.id: view.name for view in listed}
        if json_mode:
            say(dump_json([encode(result) for result in results], ascii_only=True))
        for result in results if not json_mode else ():
            why = f": {one_line(result.reason, 300)}" if result.reason else ""
            say(f"{result.session_id}  {one_line(names.get(result.session_id, '?'), 40)}  {result.result}{why}")
        return EXIT_REFUSED if any(r.result == "refused" for r in results) else EXIT_OK

    return await run_command(settings, True, body)


async def cmd_fan_out(
    settings: Settings,
    spec: str,
    task: str,
    *,
    folder: str,
    base: str,
    check: str,
    check_timeout: float,
    sandbox: Sandbox | None = None,
) -> int:
    """Fan ``task`` out in the state folder's engine (started when none runs); print the group's id."""

    async def body(client: EngineClient) -> int:
        try:
            agents = parse_fan_out(spec)
        except FanOutSpecError as exc:
            raise CommandFailed(f"fan-out {exc}", EXIT_USAGE) from None
        request = verbs.FanOut(task, agents, os.path.abspath(folder), base, check, check_timeout, sandbox)
        group = await client.call(verbs.FAN_OUT, request)
        say(group)
        say(f"follow it with `polypilot compare {group}`", err=True)
        return EXIT_OK

    return await run_command(settings, True, body)


def format_comparison(comparison: Comparison) -> str:
    """One line per attempt: session, agent, status, end, time, tokens, cost, changes, check."""
    head = f"fan-out {comparison.group}: {one_line(comparison.task, 80)}"
    if comparison.check:
        head += f"\ncheck: {one_line(comparison.check, 120)}"
    rows = [("SESSION", "AGENT", "STATUS", "END", "TIME", "TOKENS", "COST", "CHANGES", "CHECK")]
    for attempt in comparison.attempts:
        picked = " (picked)" if attempt.session_id == comparison.picked else ""
        rows.append(
            (
                attempt.session_id + picked,
                one_line(attempt.agent, 16),
                "discarded" if attempt.discarded else attempt.status,
                attempt.outcome or "-",
                f"{attempt.seconds:.1f}s" if attempt.seconds < 60 else compact_duration(attempt.seconds),
                str(attempt.usage.total_tokens) if attempt.usage.reported else "-",
                f"{attempt.usage.cost:g} {attempt.usage.currency}".strip() if attempt.usage.cost is not None else "-",
                attempt.changes.short(),
                check_words(attempt),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows]
    return head + "\n" + "\n".join(line.rstrip() for line in lines)


def check_words(attempt: Attempt) -> str:
    if attempt.checking:
        return "running"
    check = attempt.check
    if check is None:
        return "-"
    if check.verdict == "failed":
        return f"failed (exit {check.exit_code})"
    if check.verdict == "could not run":
        return f"could not run: {one_line(check.error, 60)}"
    return check.verdict


async def cmd_compare(settings: Settings, group: str, *, check: bool = False, json_mode: bool = False) -> int:
    """A fan-out's attempts side by side (``check``: its check run in each first)."""

    async def body(client: EngineClient) -> int:
        verb = verbs.RUN_CHECK if check else verbs.COMPARE
        comparison = await client.call(verb, verbs.GroupRef(group))
        say(dump_json(encode(comparison), indent=2, ascii_only=True) if json_mode else format_comparison(comparison))
        return EXIT_OK

    return await run_command(settings, True, body)  # a stopped engine's groups come back with it


async def cmd_pick(
    settings: Settings, group: str, session: str, *, discard_others: bool, force: bool, message: str | None
) -> int:
    """Merge one attempt into the base; with ``discard_others`` discard the rest (exit 1 when
    the merge was not made or one of them was kept for its work at risk)."""

    async def body(client: EngineClient) -> int:
        comparison = await client.call(verbs.COMPARE, verbs.GroupRef(group))
        try:
            attempt = pick_session(session, comparison.attempts, lambda a: a.session_id, lambda a: a.name)
        except NoSuchSession:
            raise CommandFailed(f"{session!r} is not an attempt of fan-out {group}", EXIT_USAGE) from None
        request = verbs.Pick(group, attempt.session_id, discard_others, force, message or "")
        result = await client.call(verbs.PICK, request)
        if result.committed:
            say(f"{attempt.session_id}: its work was committed ({result.committed[:12]})")
        say(f"{attempt.session_id}: {one_line(result.merge.message, 300)}")
        for name in result.merge.conflicts:
            say(f"  conflict: {one_line(name, 200)}")
        for other in result.discarded:
            say(f"{other.session_id}: {'discarded' if other.discarded else 'kept'}: {one_line(other.message, 400)}")
        kept = any(not other.discarded for other in result.discarded)
        return EXIT_OK if result.merge.merged and not kept else EXIT_REFUSED

    return await run_command(settings, True, body)
