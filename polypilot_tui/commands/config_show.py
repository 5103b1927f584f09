"""``polypilot config``: the files polypilot reads, and the settings in effect with where each
came from (environment, ``.env``, ``config.toml`` or the default), secrets redacted."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from dotenv import dotenv_values

from polypilot_tui.commands.output import EXIT_OK, say
from polypilot_tui.config import AGENTS_FILE, CONFIG_FILE, Settings, config_dir
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.infra.settings_sources import dotenv_file, read_config_file, trusted_dotenv

PREFIX = "POLYPILOT_"


def files_in_use(settings: Settings) -> dict[str, dict[str, Any]]:
    """Each file polypilot reads: its path and whether it is there (and so in use)."""
    folder = config_dir()
    agents = settings.agents_path or folder / AGENTS_FILE
    files = {
        "config": folder / CONFIG_FILE,
        "agents": agents,
        "dotenv": dotenv_file(),
    }
    return {name: {"path": str(path), "in_use": path.is_file()} for name, path in files.items()}


def origins() -> Callable[[str], str]:
    """Where a setting came from, by its name: ``environment``, ``.env``, ``config.toml`` or
    ``default`` (each source is read once)."""
    in_env = {key.upper() for key, value in os.environ.items() if value.strip()}  # empty = unset
    dotenv = trusted_dotenv()
    in_dotenv = {key.upper() for key in dotenv_values(dotenv)} if dotenv is not None else set()
    in_file = read_config_file(config_dir() / CONFIG_FILE)

    def sets(names: set[str], name: str) -> bool:
        variable = PREFIX + name.upper()
        return any(key == variable or key.startswith(variable + "__") for key in names)

    def origin(name: str) -> str:
        if sets(in_env, name):
            return "environment"
        if sets(in_dotenv, name):
            return ".env"
        return "config.toml" if name in in_file else "default"

    return origin


def in_effect(settings: Settings) -> dict[str, Any]:
    """The settings whose unset value stands for one chosen at run time, as they are in effect:
    the agents file found in the config folder, the worktrees folder inside the state folder."""
    agents = settings.agents_path
    return {
        "agents_file": str(agents) if agents is not None else None,
        "worktrees_dir": str(settings.worktree_root),
    }


def show_config(settings: Settings, json_mode: bool = False, given: frozenset[str] = frozenset()) -> int:
    """Print the files in use and the effective settings (``given``: those set by an option)."""
    REDACTOR.learn_environment()
    values = REDACTOR.scrub(settings.json_values() | in_effect(settings))  # a secret-named one goes whole
    origin = origins()
    effective = {
        name: {"value": value, "from": "command line" if name in given else origin(name)}
        for name, value in values.items()
    }
    files = REDACTOR.scrub(files_in_use(settings))
    if json_mode:
        say(dump_json({"files": files, "settings": effective}, indent=2))
        return EXIT_OK
    for name, file in files.items():
        state = "in use" if file["in_use"] else "not there"
        say(f"{name + ' file':<12} {file['path']}  ({state})")
    say()
    for name, setting in effective.items():
        value = setting["value"]
        shown = dump_json(value) if isinstance(value, (dict, list)) else "none" if value is None else str(value)
        say(f"{name:<24} {shown}  ({setting['from']})")
    return EXIT_OK
