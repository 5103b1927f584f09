"""Where the settings come from, read without validating them: POLYPILOT_* variables, the
config folder's ``.env`` and ``config.toml`` (the models that validate them are config.py's).

Kept free of the models (and of msgspec) so a headless run can read what its agent's start needs before the
models are imported (agents/head_start.py): both read the same sources with these functions.
The environment wins over ``.env``, which wins over ``config.toml``; the working folder's
``.env`` is never read (config.py says why).
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import platformdirs

from polypilot_tui.domain.safe_json import ParseError, load_toml
from polypilot_tui.infra.private import NotPrivate, check_trusted_file

APP_NAME = "polypilot"
DEMO_AGENT = "demo"
MAX_AGENTS_FILE_BYTES = 1_000_000
MAX_CONFIG_FILE_BYTES = 1_000_000
CONFIG_FILE = "config.toml"
AGENTS_FILE = "agents.toml"
DOTENV_FILE = ".env"
ENV_PREFIX = "polypilot_"
NESTED_DELIMITER = "__"
TABLE_SETTINGS = frozenset({"watchdog"})
"""Settings that are tables: given as JSON or key by key (``POLYPILOT_WATCHDOG__TOOL``)."""
PROVIDER_URL_VARIABLE = "COPILOT_PROVIDER_BASE_URL"  # the Copilot CLI's own: a model server of one's own
SETTING_NAMES = frozenset(
    {
        *("watchdog", "heartbeat_seconds", "permission_policy", "state_dir", "agents_file", "default_agent"),
        *("record", "record_max_bytes", "theme", "stop_grace_seconds", "recovery_max_attempts"),
        *("recovery_breaker_limit", "recovery_breaker_window", "demo_speed", "stream_keepalive_seconds"),
        *("stream_client_backlog_bytes", "worktrees_dir", "notifications", "team_tools_seconds"),
    }
)
"""Every setting's name (config.py's ``Settings`` fields, which a test holds to this list)."""


def config_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The user's config folder: ``POLYPILOT_CONFIG_DIR``, else the platform's (XDG on Linux)."""
    env = os.environ if environ is None else environ
    chosen = env.get("POLYPILOT_CONFIG_DIR", "").strip()
    return Path(chosen).expanduser() if chosen else Path(platformdirs.user_config_dir(APP_NAME))


def default_state_dir() -> Path:
    """The state folder when no setting names one: the platform's (XDG on Linux)."""
    return Path(platformdirs.user_state_dir(APP_NAME))


class ConfigFileError(ValueError):
    """``config.toml`` cannot be used; the message names the file and why."""


class AgentsFileError(Exception):
    """The agents file cannot be used; the message says where and why."""


class SettingsError(ValueError):
    """A setting that is not even readable (a table that is not JSON): its field and where it was."""

    def __init__(self, field: str, source: str) -> None:
        super().__init__(f"the {field} setting (POLYPILOT_{field.upper()}) in {source} is not JSON")
        self.field = field
        self.source = source


def read_toml_text(path: Path, what: str, max_bytes: int, error: type[Exception]) -> tuple[dict[str, Any], str]:
    """The tables of the TOML file ``path`` (``what`` names it in messages), read within
    ``max_bytes``, and its text; FileNotFoundError when it is missing, ``error`` when it cannot
    be used (another user could have written it, too: it names the commands polypilot runs)."""
    try:
        check_trusted_file(path)
        if path.stat().st_size > max_bytes:
            raise error(f"{what} {path} is larger than {max_bytes:,} bytes")
        text = path.read_text(encoding="utf-8")
        return load_toml(text, f"{what} {path}"), text
    except FileNotFoundError:
        raise
    except NotPrivate as exc:
        raise error(f"{what} {exc}" if exc.path == path.absolute() else f"{what} {path} is not safe: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{what} {path} cannot be read: {exc}") from None
    except ParseError as exc:
        raise error(str(exc)) from None


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings table of ``config.toml`` ({} when there is none); ConfigFileError otherwise."""
    try:
        return read_toml_text(path, "config file", MAX_CONFIG_FILE_BYTES, ConfigFileError)[0]
    except FileNotFoundError:
        return {}


def dotenv_file() -> Path:
    """The user's ``.env``: the config folder's (never the working folder's)."""
    return config_dir() / DOTENV_FILE


def trusted_dotenv() -> Path | None:
    """The config folder's ``.env`` when it is there (None otherwise); ConfigFileError when
    another user could have written it (checked like ``config.toml``)."""
    path = dotenv_file()
    try:
        check_trusted_file(path)
    except FileNotFoundError:
        return None
    except NotPrivate as exc:
        raise ConfigFileError(
            f".env file {exc}" if exc.path == path.absolute() else f".env file {path} is not safe: {exc}"
        ) from None
    return path


def config_file_settings(known: Collection[str] = SETTING_NAMES) -> dict[str, Any]:
    """``config.toml``'s settings; ConfigFileError for one that is no setting (a typo must not
    be a setting that silently does nothing)."""
    data = read_config_file(config_dir() / CONFIG_FILE)
    unknown = sorted(name for name in data if name not in known)
    if unknown:
        raise ConfigFileError(
            f"config file {config_dir() / CONFIG_FILE}: unknown setting {unknown[0]!r} "
            f"(settings: {', '.join(sorted(known))})"
        )
    return data


def prefixed_settings(
    variables: Mapping[str, str | None], source: str, known: Collection[str] = SETTING_NAMES
) -> dict[str, Any]:
    """The settings among ``variables`` (``POLYPILOT_NAME``, any case; empty ones unset): a
    table setting as JSON (``POLYPILOT_WATCHDOG={…}``) and by key (``POLYPILOT_WATCHDOG__TOOL``),
    the keys winning. Unknown names are not settings of ours and are left alone."""
    found: dict[str, Any] = {}
    nested: dict[str, dict[str, str]] = {}
    for name, value in variables.items():
        key = name.lower()
        if not key.startswith(ENV_PREFIX) or not value:
            continue
        field_name, _, inner = key.removeprefix(ENV_PREFIX).partition(NESTED_DELIMITER)
        if field_name not in known:
            continue
        if field_name not in TABLE_SETTINGS:
            if not inner:
                found[field_name] = value
        elif inner:
            nested.setdefault(field_name, {})[inner] = value
        else:
            try:
                found[field_name] = json.loads(value)
            except ValueError as exc:
                raise SettingsError(field_name, source) from exc
    for field_name, keys in nested.items():
        table = found.get(field_name)
        found[field_name] = (table if isinstance(table, dict) else {}) | keys
    return found


def gathered_settings(given: Mapping[str, Any], env_file: Path | str | None) -> dict[str, Any]:
    """Every source of the settings, merged: ``given`` (arguments) over the environment over
    ``.env`` over ``config.toml``; a table setting (the watchdog) merged key by key."""
    if env_file == DOTENV_FILE:
        env_file = trusted_dotenv()  # the config folder's, never the working folder's
    from_dotenv: dict[str, Any] = {}
    if env_file is not None and Path(env_file).is_file():
        from dotenv import dotenv_values

        from_dotenv = prefixed_settings(dotenv_values(env_file), str(env_file))
    merged = config_file_settings()
    for layer in (from_dotenv, prefixed_settings(os.environ, "the environment"), dict(given)):
        for name, value in layer.items():
            below = merged.get(name)
            merged[name] = below | value if isinstance(below, dict) and isinstance(value, dict) else value
    return merged
