"""``polypilot model SESSION [MODEL]``: list a session's models, or switch it to one.

Against the state folder's engine, started as the dashboard does (listing may start the
session's agent: it is the agent that says which models it offers). The list is one model a
line, ``id<TAB>name<TAB>description``, the current one marked ``*``; a switch applies from
the session's next turn and is refused while a turn runs (exit 1, the reason on stderr).
"""

from __future__ import annotations

from polypilot_tui.commands.live import find_view, run_command
from polypilot_tui.commands.output import EXIT_OK, say
from polypilot_tui.config import Settings
from polypilot_tui.domain.model_choice import ModelChoices
from polypilot_tui.domain.text import one_line
from polypilot_tui.engine import verbs
from polypilot_tui.service.client import EngineClient


def format_models(choices: ModelChoices) -> str:
    """One model a line (``*`` marks the current one); a note goes to stderr."""
    lines = []
    for option in choices.options:
        mark = "*" if option.id == choices.current else " "
        cells = (one_line(option.id, 120), one_line(option.name, 60), one_line(option.description, 120))
        lines.append(f"{mark} " + "\t".join(cells).rstrip())
    return "\n".join(lines)


async def cmd_model(settings: Settings, key: str, model: str | None) -> int:
    """List the models of the session ``key`` names; with ``model``, switch to it."""

    async def body(client: EngineClient) -> int:
        view = await find_view(client, key)
        name = one_line(view.name, 60)
        if model is not None:
            await client.call(verbs.SET_MODEL, verbs.SetModel(view.id, model))
            say(f"{name}: model {one_line(model, 120)} (from the next turn)")
            return EXIT_OK
        choices = await client.call(verbs.MODELS, verbs.SessionRef(view.id))
        if choices.note:
            say(f"{name}: {one_line(choices.note, 200)}", err=True)
        if choices.options:
            say(format_models(choices))
        return EXIT_OK

    return await run_command(settings, True, body)
