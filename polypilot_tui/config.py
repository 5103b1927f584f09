"""Settings (POLYPILOT_* environment, .env) and the agents file (TOML).

Secrets never live here: a provider names the environment variable that holds its key
(``api_key_env``) and the key is read only when the agent is started.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from polypilot_tui.domain.safe_json import ParseError, load_toml
from polypilot_tui.domain.watchdog import WatchdogConfig

APP_NAME = "polypilot"
DEMO_AGENT = "demo"
WEEK = 7 * 86400.0
"""The longest any timeout may be: longer is a typo, and an absurd value must not pass."""
MAX_AGENTS_FILE_BYTES = 1_000_000


class PermissionPolicy(StrEnum):
    """What to do when an agent asks for permission."""

    ASK = "ask"
    """Show the request and wait for the user (the default)."""
    ALLOW = "allow"
    """Allow once, every time, without asking."""
    DENY = "deny"
    """Reject every request."""


_TIERS = WatchdogConfig()


class WatchdogSettings(BaseModel):
    """Every watchdog tier, in seconds (``POLYPILOT_WATCHDOG__INACTIVITY=120`` …); the
    defaults and what each tier means are :class:`~polypilot_tui.domain.watchdog.WatchdogConfig`'s.

    Finite and at most a week; the tiers that decide when a turn is stuck are at least
    half a second (a smaller one would call every turn stuck at its first breath).
    """

    model_config = ConfigDict(allow_inf_nan=False)

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


class Settings(BaseSettings):
    """Application settings from POLYPILOT_* variables and ``.env``."""

    model_config = SettingsConfigDict(
        env_prefix="POLYPILOT_",
        env_nested_delimiter="__",
        env_file=".env",
        env_ignore_empty=True,
        extra="ignore",
        allow_inf_nan=False,  # NaN passes every comparison-free check and then hangs a timer
    )

    watchdog: WatchdogSettings = WatchdogSettings()
    """Timeout tiers."""
    heartbeat_seconds: float = Field(5.0, ge=0.1, le=3600.0)
    """UI heartbeat: refresh "ago" labels and catch missed redraws."""
    permission_policy: PermissionPolicy = PermissionPolicy.ASK
    """ask (default), allow or deny."""
    state_dir: Path = Field(default_factory=lambda: Path(platformdirs.user_state_dir(APP_NAME)))
    """Registry, history database, recordings and logs."""
    agents_file: Path | None = None
    """TOML file of agents (POLYPILOT_AGENTS_FILE or --agents-file)."""
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
    worktrees_dir: Path | None = None
    """Where sessions' worktrees are made (default: ``worktrees/`` in the state folder)."""

    @property
    def worktree_root(self) -> Path:
        """The folder that holds every session's worktree."""
        root = self.worktrees_dir.expanduser() if self.worktrees_dir else self.state_dir / "worktrees"
        return root.resolve()  # git runs in the repository: a relative folder would land inside it

    notifications: Literal["auto", "terminal", "system", "off"] = "auto"
    """Desktop notifications while the terminal is not focused (permission asked, turn over):
    auto = the system notifier (notify-send, osascript) when found and not over SSH, else a
    terminal escape (OSC 9 / OSC 777); terminal; system; off."""


class ProviderConfig(BaseModel):
    """A bring-your-own-key model provider (OpenAI-compatible by default)."""

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

    def api_key(self, environ: dict[str, str] | None = None) -> str:
        """Read the key from the named variable ("" when unset)."""
        env = os.environ if environ is None else environ
        return env.get(self.api_key_env, "") if self.api_key_env else ""


class AgentConfig(BaseModel):
    """One configured agent (a table of the agents file)."""

    name: str
    kind: Literal["demo", "copilot", "acp"]
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


class AgentsFileError(Exception):
    """The agents file cannot be used; the message says where and why."""


@dataclass(frozen=True)
class AgentCatalog:
    """The agents a user can start sessions with; ``demo`` is always there."""

    agents: dict[str, AgentConfig] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    """Entries that were skipped, with the reason (shown once in the UI)."""

    def names(self) -> list[str]:
        return list(self.agents)

    def get(self, name: str) -> AgentConfig:
        try:
            return self.agents[name]
        except KeyError:
            raise KeyError(f"no agent named {name!r}; configured: {', '.join(self.agents)}") from None


def demo_agent() -> AgentConfig:
    """The built-in offline agent."""
    return AgentConfig(name=DEMO_AGENT, kind="demo")


def load_agents(path: Path | None) -> AgentCatalog:
    """Read the agents file. A broken file raises AgentsFileError; a bad entry is skipped."""
    agents: dict[str, AgentConfig] = {DEMO_AGENT: demo_agent()}
    if path is None:
        return AgentCatalog(agents)
    try:
        if Path(path).stat().st_size > MAX_AGENTS_FILE_BYTES:
            raise AgentsFileError(f"agents file {path} is larger than {MAX_AGENTS_FILE_BYTES:,} bytes")
        raw: dict[str, Any] = load_toml(Path(path).read_text(encoding="utf-8"), f"agents file {path}")
    except FileNotFoundError:
        raise AgentsFileError(f"agents file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentsFileError(f"agents file {path} cannot be read: {exc}") from None
    except ParseError as exc:
        raise AgentsFileError(str(exc)) from None
    problems: list[str] = []
    for name, table in raw.items():
        if not isinstance(table, dict):
            problems.append(f"{name}: expected a table, got {type(table).__name__}")
            continue
        if name == DEMO_AGENT and table.get("kind", "demo") != "demo":
            problems.append(f"{name}: the name 'demo' is the built-in demo agent; pick another name")
            continue
        try:
            agents[name] = AgentConfig(name=name, **table)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or name
            problems.append(f"{name}: {where}: {first.get('msg', 'invalid')}")
    return AgentCatalog(agents, tuple(problems))
