"""The dashboard's session actions as commands, against the state folder's engine:
``ls``, ``stop``, ``reconnect``, ``close`` and ``answer``.

``ls``, ``stop`` and ``answer`` never start an engine (with none running there is nothing to
list, stop or answer: exit 5); ``reconnect`` and ``close`` start it as the dashboard does.
Every text an agent or a user wrote is printed stripped of terminal control sequences; ``ls``
is a listing like ``status`` and is redacted.
"""

from __future__ import annotations

from polypilot_tui.commands.live import CommandFailed, find_view, one_view, run_command
from polypilot_tui.commands.output import say
from polypilot_tui.commands.status import learn_secrets
from polypilot_tui.config import Settings
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.text import compact_duration, one_line, strip_control
from polypilot_tui.domain.turn import PermissionPrompt
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Verb
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.service.client import EngineClient

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


async def cmd_ls(settings: Settings, json_mode: bool = False) -> int:
    """The live engine's sessions: a table, or (``json_mode``) a JSON array of views."""

    async def body(client: EngineClient) -> int:
        listed = await client.call(verbs.SESSIONS, verbs.NoArgs())
        now, found = listed.now, list(listed.sessions)
        learn_secrets(settings)
        found = REDACTOR.scrub(found)  # a listing, like status: redacted (``follow`` shows the chat as it is)
        if json_mode:
            say(dump_json([v.to_json() for v in found], indent=2, ascii_only=True))
        else:
            say(format_views(found, now))
        return EXIT_OK

    return await run_command(settings, False, body)


def format_views(found: list[SessionView], now: float) -> str:
    """One line per session: id, name, agent, status, last activity, branch, reason."""
    if not found:
        return "no sessions"
    rows = [("ID", "NAME", "AGENT", "STATUS", "LAST ACTIVITY", "BRANCH", "REASON")]
    for v in found:
        ago = f"{compact_duration(now - v.last_activity_at)} ago" if v.last_activity_at is not None else "-"
        status = v.status.value + (f" +{v.queued} queued" if v.queued else "")
        # An id comes from an engine, maybe another machine's: no terminal control reaches the screen.
        cells = (
            one_line(v.id, 64),
            one_line(v.name, 24),
            one_line(v.agent, 16),
            status,
            ago,
            one_line(v.branch, 32) or "-",
        )
        rows.append((*cells, one_line(v.reason, 70)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows]
    return "\n".join(line.rstrip() for line in lines)


ACTS: dict[str, Verb[verbs.SessionRef, object]] = {
    "stop": verbs.STOP,
    "reconnect": verbs.RECONNECT,
    "close": verbs.CLOSE,
}
"""The session commands that are one verb of the session and nothing more."""


async def cmd_act(settings: Settings, key: str, action: str) -> int:
    """``stop``, ``reconnect`` or ``close`` the session ``key`` names; one line says what happened."""

    async def body(client: EngineClient) -> int:
        view = await find_view(client, key)
        name = one_line(view.name, 60)
        if action == "stop" and not view.status.busy:
            say(f"{name}: no turn is running")
            return EXIT_OK
        result = await client.call(ACTS[action], verbs.SessionRef(view.id))
        if action == "close" and result is False:
            raise CommandFailed(f"{name} was not closed")
        done = {"stop": "stopped", "reconnect": "reconnected", "close": "closed"}[action]
        say(f"{name}: {done}")
        return EXIT_OK

    return await run_command(settings, action != "stop", body)


async def cmd_clear_queue(settings: Settings, key: str) -> int:
    """Drop every prompt queued in the session ``key`` names; one line says how many."""

    async def body(client: EngineClient) -> int:
        view = await find_view(client, key)
        dropped = await client.call(verbs.CLEAR_QUEUE, verbs.SessionRef(view.id))
        say(f"{one_line(view.name, 60)}: {dropped} queued prompt(s) dropped")
        return EXIT_OK

    return await run_command(settings, True, body)


async def cmd_answer(settings: Settings, key: str, option: str | None) -> int:
    """Answer the session's pending permission with ``option`` (an id, or a unique start of an
    id or label); with none, list the options (``id<TAB>label``) and exit 2."""

    async def body(client: EngineClient) -> int:
        view = await find_view(client, key)
        prompt = view.pending_permission
        if prompt is None:
            raise CommandFailed(f"{one_line(view.name, 60)} is not waiting for a permission")
        if option is None:
            say(f"{one_line(view.name, 60)} asks: {one_line(prompt.title, 200)}", err=True)
            for option_id, label, _kind in prompt.options:
                say(f"{option_id}\t{one_line(label, 80)}")
            return EXIT_USAGE
        option_id, label = choose_option(prompt, option)
        current = (await one_view(client, view.id)).pending_permission
        if current is None or current.request_id != prompt.request_id:
            raise CommandFailed("that permission was answered meanwhile (or its turn ended)")
        answer = verbs.AnswerPermission(view.id, prompt.request_id, option_id)
        await client.call(verbs.ANSWER_PERMISSION, answer)
        say(f"{one_line(view.name, 60)}: answered {one_line(label, 80)}")
        return EXIT_OK

    return await run_command(settings, False, body)


def choose_option(prompt: PermissionPrompt, wanted: str) -> tuple[str, str]:
    """The option ``wanted`` names: its id exactly, else the one option whose id or label starts
    with it (case ignored). CommandFailed (exit 2) listing the options otherwise."""
    options = [(oid, label) for oid, label, _kind in prompt.options]
    for oid, label in options:
        if oid == wanted:
            return oid, label
    low = wanted.strip().lower()
    matches = [(o, lab) for o, lab in options if low and (o.lower().startswith(low) or lab.lower().startswith(low))]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(f"{strip_control(o)} ({one_line(lab, 40)})" for o, lab in options)
    why = f"{wanted!r} fits {len(matches)} options" if matches else f"no option {wanted!r}"
    raise CommandFailed(f"{strip_control(why)}; the options: {listed}", EXIT_USAGE)
