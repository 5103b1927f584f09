"""The built-in catalog of known agents (``catalog.toml``), merged with the user's agents file.

Every place that needs the agents — the engine, ``polypilot agents``, ``run`` and ``new`` —
builds them here, so an installed agent is offered the same way everywhere, with no file to
write first.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polypilot_tui.domain.safe_json import load_toml
from polypilot_tui.infra.settings_sources import AGENTS_FILE, config_dir

if TYPE_CHECKING:
    from polypilot_tui.config import AgentCatalog, Settings

CATALOG_FILE = "catalog.toml"


@cache
def builtin_tables() -> dict[str, dict[str, Any]]:
    """The known agents' tables, as shipped with polypilot."""
    text = Path(__file__).with_name(CATALOG_FILE).read_text(encoding="utf-8")  # importlib.resources: +5 ms
    return load_toml(text, f"built-in {CATALOG_FILE}")


def load_catalog(settings: Settings, agents_file: Path | None = None) -> AgentCatalog:
    """The demo agent, the built-in catalog and the user's agents file (``agents_file``, else
    the one the settings name or the config folder holds); AgentsFileError for a broken file."""
    from dataclasses import replace

    from polypilot_tui.config import file_stamp, load_agents  # the models: a head start reads the tables alone

    path = agents_file or settings.agents_path
    source = path or config_dir() / AGENTS_FILE  # not there yet: made later, it is a change
    stamp = file_stamp(source)  # before reading: a write while it is read counts as a change
    return replace(load_agents(path, builtin_tables()), source=source, source_stamp=stamp)
