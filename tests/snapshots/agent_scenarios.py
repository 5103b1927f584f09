"""Snapshot scenarios of what the agents offer: the catalog in the new-session dialog, a session's models."""

from __future__ import annotations

from msgspec import structs
from textual.widgets import OptionList

from polypilot_tui.domain.agents import AgentOffer, Availability
from polypilot_tui.domain.model_choice import ModelChoices, ModelOption
from polypilot_tui.engine.api import EngineError
from polypilot_tui.ui.screens.model_picker import ModelPickerScreen
from tests.snapshots.fakes import Driver
from tests.snapshots.scenarios import new_session_dialog
from tests.ui.helpers import engine_of

CATALOG_OFFERS = (
    AgentOffer("demo", "demo", Availability.READY, where="built in"),
    AgentOffer("copilot", "copilot", Availability.READY, "GitHub Copilot CLI", "/usr/local/bin/copilot"),
    AgentOffer(
        "opencode",
        "acp",
        Availability.NEEDS_SIGN_IN,
        "opencode",
        "/home/dev/.npm-global/bin/opencode",
        "no sign-in found: run `opencode auth login`, or set a provider key such as ANTHROPIC_API_KEY",
    ),
    AgentOffer(
        "codex",
        "acp",
        Availability.NOT_INSTALLED,
        "OpenAI Codex (codex-acp)",
        "codex-acp is not found",
        "its command codex-acp is not found; install it with: npm install -g @zed-industries/codex-acp",
    ),
    AgentOffer(
        "byok",
        "copilot",
        Availability.NO_KEY,
        "",
        "/usr/local/bin/copilot",
        "the provider key variable MY_KEY is not set (api_key_env)",
    ),
)


async def first_start(d: Driver) -> None:
    """A first start on a machine with agents installed: the demo session says it is the demo,
    and names the agents found ready (and the one that needs a sign-in) with ctrl+n."""

    async def offers(request: object) -> tuple[AgentOffer, ...]:
        return CATALOG_OFFERS

    engine_of(d.app).agents = offers  # type: ignore[method-assign]  # what the engine's machine answered
    d.app.dashboard.look_for_agents()
    await d.app.dashboard.workers.wait_for_complete()
    await d.settle()


async def new_session_catalog(d: Driver) -> None:
    """The dialog offering agents that are ready, may need a sign-in, are not installed, or lack a key."""

    async def offers(request: object) -> tuple[AgentOffer, ...]:
        return CATALOG_OFFERS

    engine_of(d.app).agents = offers  # type: ignore[method-assign]  # what the engine's machine answered
    d.app.settings = structs.replace(d.app.settings, **{"default_agent": "codex"})  # not installed: not picked
    await new_session_dialog(d)


# ---- models ("Switch model…") ----------------------------------------------------------
CODEX_MODELS = ModelChoices(
    "mock-model",
    (
        ModelOption("mock-model", "mock-model"),
        ModelOption("gpt-5.5", "GPT-5.5", "Frontier model for complex coding, research, and real-world work."),
        ModelOption("gpt-5.4", "gpt-5.4", "Strong model for everyday coding."),
        ModelOption("gpt-5.4-mini", "GPT-5.4-Mini", "Small, fast, and cost-efficient model for simpler coding tasks."),
    ),
)
"""What codex-acp 0.16.0 offers against the scripted model server (its configOptions model select)."""


async def model_picker(d: Driver) -> None:
    """The picker over codex's models after a refused switch (a turn was running)."""
    sid = await d.add("codex-review")
    d.app.select(sid)
    await d.settle()

    async def load() -> ModelChoices:
        return CODEX_MODELS

    async def refuse(model_id: str) -> None:
        raise EngineError("a turn is running: switch the model when it has ended (or Stop it first)")

    d.app.push_screen(ModelPickerScreen("codex-review", load, refuse))
    await d.settle()
    options = d.app.screen.query_one(OptionList)
    options.action_cursor_down()
    options.action_select()
    await d.settle()
