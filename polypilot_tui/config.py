"""Settings (POLYPILOT_* environment, ``.env``, the user's ``config.toml``) and agents files (TOML).

The files live in the platform config folder (``~/.config/polypilot/`` on Linux, or
``POLYPILOT_CONFIG_DIR``). The environment wins over ``.env``, which wins over
``config.toml``. The working folder's ``.env`` is never read: that folder is a repository
(what its authors chose, or an agent wrote) or a shared one like /tmp, and its ``.env``
could widen the permission policy or name the agents that run. Secrets never live here: a
provider names the environment variable that holds its key (``api_key_env``) and the key is
read only when the agent is started.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from polypilot_tui.domain.agents import why_missing
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.entry_errors import entry_problem
from polypilot_tui.domain.pass_env import pass_env_problem
from polypilot_tui.domain.safe_json import line_of, toml_key_lines
from polypilot_tui.domain.urls import url_problem
from polypilot_tui.domain.watchdog import WatchdogConfig
from polypilot_tui.infra.settings_sources import AGENTS_FILE as AGENTS_FILE
from polypilot_tui.infra.settings_sources import APP_NAME as APP_NAME
from polypilot_tui.infra.settings_sources import CONFIG_FILE as CONFIG_FILE
from polypilot_tui.infra.settings_sources import DEMO_AGENT as DEMO_AGENT
from polypilot_tui.infra.settings_sources import DOTENV_FILE as DOTENV_FILE
from polypilot_tui.infra.settings_sources import MAX_AGENTS_FILE_BYTES as MAX_AGENTS_FILE_BYTES
from polypilot_tui.infra.settings_sources import PROVIDER_URL_VARIABLE as PROVIDER_URL_VARIABLE
from polypilot_tui.infra.settings_sources import AgentsFileError as AgentsFileError
from polypilot_tui.infra.settings_sources import ConfigFileError as ConfigFileError
from polypilot_tui.infra.settings_sources import SettingsError as SettingsError
from polypilot_tui.infra.settings_sources import config_dir as config_dir
from polypilot_tui.infra.settings_sources import default_state_dir
from polypilot_tui.infra.settings_sources import gathered_settings as gathered_settings
from polypilot_tui.infra.settings_sources import read_toml_text as read_toml_text

WEEK = 7 * 86400.0
"""The longest any timeout may be: longer is a typo, and an absurd value must not pass."""


class PermissionPolicy(StrEnum):
    """What to do when an agent asks for permission."""

    ASK = "ask"
    """Show the request and wait for the user (the default)."""
    ALLOW = "allow"
    """Allow once, every time, without asking."""
    DENY = "deny"
    """Reject every request."""
    ALLOW_IN_SANDBOX = "allow-in-sandbox"
    """Allow once a request of a sandboxed session that names only places inside its workspace
    (domain/sandbox_policy.py); ask everything else, and everything of a session not sandboxed."""


ASKS_NOBODY = frozenset({PermissionPolicy.ALLOW, PermissionPolicy.DENY})
"""Policies that answer every request themselves: under the others a request may wait for the user."""

_TIERS = WatchdogConfig()


class WatchdogSettings(BaseModel):
    """Every watchdog tier, in seconds (``POLYPILOT_WATCHDOG__INACTIVITY=120`` …); the
    defaults and what each tier means are :class:`~polypilot_tui.domain.watchdog.WatchdogConfig`'s.

    Finite and at most a week; the tiers that decide when a turn is stuck are at least
    half a second (a smaller one would call every turn stuck at its first breath).
    """

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid")  # a misspelt tier must not silently be the default

    inactivity: float = Field(_TIERS.inactivity, ge=0.5, le=WEEK)
    tool: float = Field(_TIERS.tool, ge=0.5, le=WEEK)
    tool_escalation: float = Field(_TIERS.tool_escalation, ge=0.5, le=WEEK)
    used_tools_idle: float = Field(_TIERS.used_tools_idle, ge=0.5, le=WEEK)
    resume_quiescence: float = Field(_TIERS.resume_quiescence, ge=0.5, le=WEEK)
    reconnect: float = Field(_TIERS.reconnect, ge=0.5, le=WEEK)
    max_turn: float = Field(_TIERS.max_turn, ge=0, le=WEEK)
    turn_end_fallback: float = Field(_TIERS.turn_end_fallback, ge=0, le=WEEK)
    turn_end_tool_extra: float = Field(_TIERS.turn_end_tool_extra, ge=0, le=WEEK)
    post_completion_idle: float = Field(_TIERS.post_completion_idle, ge=0, le=WEEK)
    dead_send: float = Field(_TIERS.dead_send, ge=0, le=WEEK)

    def to_config(self) -> WatchdogConfig:
        """The pure watchdog's view of these settings."""
        return WatchdogConfig(**self.model_dump())


class Settings(BaseModel):
    """Application settings from arguments, POLYPILOT_* variables, ``.env`` and ``config.toml``
    (:func:`gathered_settings`). ``_env_file`` names another ``.env`` (None: none at all)."""

    model_config = ConfigDict(
        extra="ignore",
        validate_default=True,
        allow_inf_nan=False,  # NaN passes every comparison-free check and then hangs a timer
    )

    def __init__(self, _env_file: Path | str | None = DOTENV_FILE, **values: Any) -> None:
        super().__init__(**gathered_settings(values, _env_file))

    watchdog: WatchdogSettings = WatchdogSettings()
    """Timeout tiers."""
    heartbeat_seconds: float = Field(5.0, ge=0.1, le=3600.0)
    """UI heartbeat: refresh "ago" labels and catch missed redraws."""
    permission_policy: PermissionPolicy = PermissionPolicy.ASK
    """ask (default), allow, deny or allow-in-sandbox."""
    state_dir: Path = Field(default_factory=default_state_dir)
    """Registry, history database, recordings and logs."""
    agents_file: Path | None = None
    """TOML file of agents (POLYPILOT_AGENTS_FILE or --agents-file; default ``agents.toml`` in
    the config folder when it exists): they extend the built-in catalog or override its entries."""
    default_agent: str = DEMO_AGENT
    """Agent used by `make run` and new sessions unless another is chosen."""
    record: bool = True
    """Record every session's raw event stream as a replayable trace."""
    record_max_bytes: int = Field(5_000_000, ge=0, le=1_000_000_000)
    """Size cap per recording; later events are dropped with a marker line."""
    theme: str = "polypilot-night"
    """Theme name (themes/*.toml or a built-in Textual theme)."""
    stop_grace_seconds: float = Field(5.0, gt=0, le=600.0)
    """Stop: how long to wait after abort before killing the agent."""
    recovery_max_attempts: int = Field(2, ge=0, le=100)
    """Permission-denial recoveries per session before giving up."""
    recovery_breaker_limit: int = Field(5, ge=1, le=10_000)
    """Recoveries across all sessions within the breaker window before the breaker opens."""
    recovery_breaker_window: float = Field(300.0, gt=0, le=WEEK)
    """Circuit-breaker window in seconds."""
    demo_speed: float = Field(1.0, ge=0.01, le=100_000.0)
    """Speed factor of the demo agent's scripted replies (2 = twice as fast)."""
    stream_keepalive_seconds: float = Field(15.0, ge=0.1, le=15.0)
    """How often a silent engine stream says something (15 s at most: clients count on it)."""
    stream_client_backlog_bytes: int = Field(8 << 20, ge=64 << 10, le=1 << 30)
    """What may wait for a client that does not read before it is sent a fresh snapshot instead."""
    worktrees_dir: Path | None = None
    """Where sessions' worktrees are made (default: ``worktrees/`` in the state folder)."""
    notifications: Literal["auto", "terminal", "system", "off"] = "auto"
    """Desktop notifications while the terminal is not focused (permission asked, turn over):
    auto = the system notifier (notify-send, osascript) when found and not over SSH, else a
    terminal escape (OSC 9 / OSC 777); terminal; system; off."""
    team_tools_seconds: float = Field(45.0, gt=0, le=3600.0)
    """How long an agent handed the team tools (the polypilot MCP relay) may take to list them
    before its session says they did not arrive."""

    @field_validator("state_dir", "agents_file", "worktrees_dir", mode="after")
    @classmethod
    def _expand_home(cls, path: Path | None) -> Path | None:
        # "~/state" in config.toml or a quoted variable is the home folder, never a "~" folder here.
        return path.expanduser() if path is not None else None

    @property
    def agents_path(self) -> Path | None:
        """The agents file in use: the one named, else the config folder's when it exists."""
        if self.agents_file is not None:
            return self.agents_file.expanduser()  # --agents-file is set by model_copy, past the validator
        default = config_dir() / AGENTS_FILE
        return default if default.is_file() else None

    @property
    def worktree_root(self) -> Path:
        """The folder that holds every session's worktree."""
        root = self.worktrees_dir or self.state_dir / "worktrees"
        return root.resolve()  # git runs in the repository: a relative folder would land inside it


class ProviderConfig(BaseModel):
    """A bring-your-own-key model provider (OpenAI-compatible by default)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key must not silently be the default

    type: Literal["openai", "azure", "anthropic"] = "openai"
    base_url: str
    api_key_env: str | None = None
    """Name of the environment variable that holds the key; the key itself never is config."""
    wire_api: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_literal_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "api_key" in data:
            raise ValueError(
                "keys never go in the agents file: put it in an environment variable "
                "and name that variable with api_key_env"
            )
        return data

    @field_validator("base_url")
    @classmethod
    def _a_url(cls, url: str) -> str:
        # "127.0.0.1:8000/v1" reported ready and then failed every turn far from the typo.
        problem = url_problem(url)
        if problem is not None:
            raise ValueError(problem)
        return url.strip()

    def api_key(self, environ: dict[str, str] | None = None) -> str:
        """Read the key from the named variable ("" when unset)."""
        env = os.environ if environ is None else environ
        return env.get(self.api_key_env, "") if self.api_key_env else ""


class SignInEvidence(BaseModel):
    """One sign that an agent is signed in: a variable set, or a file (holding ``contains``)."""

    model_config = ConfigDict(extra="forbid")

    env: str | None = None
    file: str | None = None
    """A path; ``~`` and ``${VAR}`` / ``${VAR:-default}`` are expanded."""
    contains: str | None = None


class AgentConfig(BaseModel):
    """One agent: a built-in catalog entry, or a table of the user's agents file."""

    model_config = ConfigDict(extra="forbid")  # `comand = …` must not be an agent without a command

    name: str
    kind: Literal["demo", "copilot", "acp"]
    title: str = ""
    """What it is, in a few words ("GitHub Copilot CLI")."""
    install: str = ""
    """How to install it (a command), said when it is not found."""
    sign_in: str = ""
    """How to sign in or set a key, said when it is not signed in."""
    signed_in: list[SignInEvidence] = Field(default_factory=list)
    """Any one of these says it is signed in; none listed: nothing to check."""
    pass_env: list[str] = Field(default_factory=list)
    """Variables of ours an ACP agent gets as they are (``NAME``, or ``PREFIX_*``)."""

    @field_validator("pass_env")
    @classmethod
    def _named_variables(cls, names: list[str]) -> list[str]:
        for name in names:
            if problem := pass_env_problem(name):
                raise ValueError(problem)
        return names

    command: str | None = None
    """Executable: the Copilot CLI path, or the ACP agent command. None = the default."""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the agent process."""
    cwd: Path | None = None
    model: str | None = None
    provider: ProviderConfig | None = None
    script: str | None = None
    """Demo agent only: the default script name."""
    sandbox: Literal["off", "workspace"] = "off"
    """The sandbox its sessions get unless one is chosen: off, or workspace (docs/sandbox.md;
    domain/sandbox.py's SandboxMode, named here in words: a headless run loads no more)."""
    network: list[str] | None = None
    """The network rule of its sandboxed sessions: only these ``host:port`` endpoints and its
    model's are reachable ([] for its model's alone); None: the machine's network."""
    sandbox_writable: list[str] = Field(default_factory=list)
    """Its own state folders, writable in its sandbox (``~`` and ``${VAR:-default}`` expanded
    in its environment): its sessions, logs and caches."""
    sandbox_read_only: list[str] = Field(default_factory=list)
    """Folders inside those state folders kept read-only in its sandbox (made when missing):
    what the agent, run outside a sandbox later, runs as code (Copilot's auto-update ``pkg``)."""

    def missing_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """Why this agent has no provider key — the variable its ``api_key_env`` names is unset
        or empty (in the environment and in the agent's ``env``) — or None. Names the variable,
        never a value."""
        provider = self.provider
        if provider is None or not provider.api_key_env:
            return None
        env = dict(os.environ if environ is None else environ) | self.env
        if provider.api_key(env):
            return None
        return f"the provider key variable {provider.api_key_env} is not set (api_key_env)"


def file_stamp(path: Path) -> tuple[int, int] | None:
    """A file's (mtime in ns, size), None when it cannot be seen: enough to tell it was changed."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


@dataclass(frozen=True)
class AgentCatalog:
    """The agents a user can start sessions with; ``demo`` is always there."""

    agents: dict[str, AgentConfig] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    """Entries that were skipped, with the reason, the file and the line (shown once in the UI)."""
    skipped: Mapping[str, str] = field(default_factory=dict)
    """The problem of each skipped entry, by the entry's name."""
    source: Path | None = None
    """The agents file it was read from, or the config folder's that was not there yet."""
    source_stamp: tuple[int, int] | None = None
    """That file's (mtime, size) when it was read; None when it was not there."""

    def names(self) -> list[str]:
        return list(self.agents)

    def source_changed(self) -> bool:
        """Whether the agents file has been written, made or removed since it was read."""
        return self.source is not None and file_stamp(self.source) != self.source_stamp

    def get(self, name: str) -> AgentConfig:
        try:
            return self.agents[name]
        except KeyError:
            raise KeyError(self.missing(name)) from None

    def missing(self, name: str) -> str:
        """Why there is no agent ``name`` (skipped: where and why; else the close names)."""
        return why_missing(name, list(self.agents), self.skipped)


def demo_agent() -> AgentConfig:
    """The built-in offline agent."""
    return AgentConfig(name=DEMO_AGENT, kind="demo")


_ENTRY_KEYS = {  # what an agents-file entry and its tables may hold (for "did you mean")
    "": [n for n in AgentConfig.model_fields if n != "name"],
    "provider": list(ProviderConfig.model_fields),
    "signed_in": list(SignInEvidence.model_fields),
}


def load_agents(path: Path | None, builtin: Mapping[str, Mapping[str, Any]] | None = None) -> AgentCatalog:
    """The agents: ``demo``, the ``builtin`` catalog's tables, then the agents file's. A file
    table with a built-in's name changes only the keys it sets; a new name adds an agent.
    A broken file raises AgentsFileError; a bad entry is skipped and said in ``problems``, with
    the file and the line (an unknown key is an error: a typo must not pass as a default)."""
    tables: dict[str, Any] = {name: dict(table) for name, table in (builtin or {}).items()}
    raw, lines = read_agents_file(path) if path is not None else ({}, {})
    skipped: dict[str, str] = {}

    def skip(name: str, where: tuple[str, ...], why: str) -> None:
        line = line_of(lines, (name, *where))
        skipped[name] = f"{path}{f':{line}' if line else ''}: {name}: {why}"

    for name, table in raw.items():
        if not isinstance(table, dict):
            skip(name, (), f"expected a table, got {type(table).__name__}")
        elif name == DEMO_AGENT and table.get("kind", "demo") != "demo":
            skip(name, (), "the name 'demo' is the built-in demo agent; pick another name")
        elif "name" in table:
            skip(name, ("name",), "a table's name is its agent's name: remove the `name` key")
        else:
            tables[name] = tables.get(name, {}) | table
    agents: dict[str, AgentConfig] = {DEMO_AGENT: demo_agent()}
    for name, table in tables.items():
        if name in skipped:
            continue
        try:
            agents[name] = AgentConfig(name=name, **table)
        except ValidationError as exc:
            skip(name, *entry_problem(exc.errors(), _ENTRY_KEYS, lines, name))
    return AgentCatalog(agents, tuple(skipped.values()), skipped)


def read_agents_file(path: Path) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    """Its tables and the line of each key; AgentsFileError when it is missing, too large or not TOML."""
    try:
        tables, text = read_toml_text(Path(path), "agents file", MAX_AGENTS_FILE_BYTES, AgentsFileError)
    except FileNotFoundError:
        raise AgentsFileError(f"agents file {path} does not exist") from None
    return tables, toml_key_lines(text)
