"""Settings (POLYPILOT_* environment, ``.env``, the user's ``config.toml``) and agents files (TOML).

The files live in the platform config folder (``~/.config/polypilot/`` on Linux, or
``POLYPILOT_CONFIG_DIR``). The environment wins over ``.env``, which wins over
``config.toml``. The working folder's ``.env`` is never read: that folder is a repository
(what its authors chose, or an agent wrote) or a shared one like /tmp, and its ``.env``
could widen the permission policy or name the agents that run. Secrets never live here: a
provider names the environment variable that holds its key (``api_key_env``) and the key is
read only when the agent is started.

The models are msgspec structs, read and checked by :func:`checked` (``Settings.read`` for the
settings). A struct made directly (``AgentConfig(name=…)``) is not checked: code that makes one
from anything read goes through :func:`checked`. msgspec stops at the first problem; the
agents file's unknown keys are found all at once beforehand (:func:`key_problems`). Why not
pydantic: its import and these models cost the dashboard's start ~150 ms (issue 25).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import Meta, Struct, structs

from polypilot_tui.domain.agents import why_missing
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.entry_errors import UNKNOWN_KEY, entry_problem
from polypilot_tui.domain.pass_env import pass_env_problem
from polypilot_tui.domain.safe_json import line_of, toml_key_lines
from polypilot_tui.domain.urls import url_problem
from polypilot_tui.domain.watchdog import WatchdogConfig
from polypilot_tui.infra.conversion_errors import read_problem, type_at
from polypilot_tui.infra.redact import REDACTOR
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

T = TypeVar("T")

STREAM_KEEPALIVE_SECONDS = 15.0
"""The longest a silent engine stream stays silent (the default too): clients count on it."""

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

_TIERS = WatchdogConfig
"""The tiers' defaults, read from the class (an instance would make it at import: domain/dataclass_on_use.py)."""

Tier = Annotated[float, Meta(ge=0.5, le=WEEK)]
"""A tier that decides when a turn is stuck: a smaller one would call every turn stuck at its first breath."""
Span = Annotated[float, Meta(ge=0, le=WEEK)]
"""Any other wait: finite (NaN fails every bound) and at most a week."""


class WatchdogSettings(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Every watchdog tier, in seconds (``POLYPILOT_WATCHDOG__INACTIVITY=120`` …); the
    defaults and what each tier means are :class:`~polypilot_tui.domain.watchdog.WatchdogConfig`'s.

    Finite and at most a week; the tiers that decide when a turn is stuck are at least
    half a second. A misspelt tier is an error, never silently the default.
    """

    inactivity: Tier = _TIERS.inactivity
    tool: Tier = _TIERS.tool
    tool_escalation: Tier = _TIERS.tool_escalation
    used_tools_idle: Tier = _TIERS.used_tools_idle
    resume_quiescence: Tier = _TIERS.resume_quiescence
    reconnect: Tier = _TIERS.reconnect
    max_turn: Span = _TIERS.max_turn
    turn_end_fallback: Span = _TIERS.turn_end_fallback
    turn_end_tool_extra: Span = _TIERS.turn_end_tool_extra
    post_completion_idle: Span = _TIERS.post_completion_idle
    dead_send: Span = _TIERS.dead_send

    def to_config(self) -> WatchdogConfig:
        """The pure watchdog's view of these settings."""
        return WatchdogConfig(**structs.asdict(self))


class Settings(Struct, frozen=True, kw_only=True):
    """Application settings from arguments, POLYPILOT_* variables, ``.env`` and ``config.toml``
    (:func:`gathered_settings`), read and checked by :meth:`read`. The sources refuse or leave alone
    a name that is no setting themselves; an argument that is none is a TypeError."""

    watchdog: WatchdogSettings = WatchdogSettings()
    """Timeout tiers."""
    heartbeat_seconds: Annotated[float, Meta(ge=0.1, le=3600.0)] = 5.0
    """UI heartbeat: refresh "ago" labels and catch missed redraws."""
    permission_policy: PermissionPolicy = PermissionPolicy.ASK
    """ask (default), allow, deny or allow-in-sandbox."""
    state_dir: Path = msgspec.field(default_factory=default_state_dir)
    """Registry, history database, recordings and logs."""
    agents_file: Path | None = None
    """TOML file of agents (POLYPILOT_AGENTS_FILE or --agents-file; default ``agents.toml`` in
    the config folder when it exists): they extend the built-in catalog or override its entries."""
    default_agent: str = DEMO_AGENT
    """Agent used by `make run` and new sessions unless another is chosen."""
    record: bool = True
    """Record every session's raw event stream as a replayable trace."""
    record_max_bytes: Annotated[int, Meta(ge=0, le=1_000_000_000)] = 5_000_000
    """Size cap per recording; later events are dropped with a marker line."""
    theme: str = "polypilot-night"
    """Theme name (themes/*.toml or a built-in Textual theme)."""
    stop_grace_seconds: Annotated[float, Meta(gt=0, le=600.0)] = 5.0
    """Stop: how long to wait after abort before killing the agent."""
    recovery_max_attempts: Annotated[int, Meta(ge=0, le=100)] = 2
    """Permission-denial recoveries per session before giving up."""
    recovery_breaker_limit: Annotated[int, Meta(ge=1, le=10_000)] = 5
    """Recoveries across all sessions within the breaker window before the breaker opens."""
    recovery_breaker_window: Annotated[float, Meta(gt=0, le=WEEK)] = 300.0
    """Circuit-breaker window in seconds."""
    demo_speed: Annotated[float, Meta(ge=0.01, le=100_000.0)] = 1.0
    """Speed factor of the demo agent's scripted replies (2 = twice as fast)."""
    stream_keepalive_seconds: Annotated[float, Meta(ge=0.1, le=STREAM_KEEPALIVE_SECONDS)] = STREAM_KEEPALIVE_SECONDS
    """How often a silent engine stream says something (15 s at most: clients count on it)."""
    stream_client_backlog_bytes: Annotated[int, Meta(ge=64 << 10, le=1 << 30)] = 8 << 20
    """What may wait for a client that does not read before it is sent a fresh snapshot instead."""
    worktrees_dir: Path | None = None
    """Where sessions' worktrees are made (default: ``worktrees/`` in the state folder)."""
    notifications: Literal["auto", "terminal", "system", "off"] = "auto"
    """Desktop notifications while the terminal is not focused (permission asked, turn over):
    auto = the system notifier (notify-send, osascript) when found and not over SSH, else a
    terminal escape (OSC 9 / OSC 777); terminal; system; off."""
    team_tools_seconds: Annotated[float, Meta(gt=0, le=3600.0)] = 45.0
    """How long an agent handed the team tools (the polypilot MCP relay) may take to list them
    before its session says they did not arrive."""

    @classmethod
    def read(cls, env_file: Path | str | None = DOTENV_FILE, **given: Any) -> Settings:
        """The settings ``given`` over every source (``env_file`` names another ``.env``; None:
        none at all); :class:`InvalidSettings` naming the field when one is wrong. Values given
        as text (variables, ``.env``) are read as their field's type."""
        unknown = sorted(set(given) - set(cls.__struct_fields__))
        if unknown:  # a misspelt argument must not be a setting that silently does nothing
            raise TypeError(f"no setting named {unknown[0]!r}")
        return checked(cls, gathered_settings(given, env_file), text=True)

    def json_values(self) -> dict[str, Any]:
        """Every setting as JSON values (a path as its text, a table as an object)."""
        values: dict[str, Any] = msgspec.to_builtins(self, enc_hook=str)
        return values

    @property
    def agents_path(self) -> Path | None:
        """The agents file in use: the one named, else the config folder's when it exists."""
        if self.agents_file is not None:
            return self.agents_file.expanduser()  # --agents-file is set by structs.replace, past the reading
        default = config_dir() / AGENTS_FILE
        return default if default.is_file() else None

    @property
    def worktree_root(self) -> Path:
        """The folder that holds every session's worktree."""
        root = self.worktrees_dir or self.state_dir / "worktrees"
        return root.resolve()  # git runs in the repository: a relative folder would land inside it


class ProviderConfig(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A bring-your-own-key model provider (OpenAI-compatible by default)."""

    type: Literal["openai", "azure", "anthropic"] = "openai"
    base_url: str
    api_key_env: str | None = None
    """Name of the environment variable that holds the key; the key itself never is config."""
    wire_api: str | None = None

    def __post_init__(self) -> None:
        # "127.0.0.1:8000/v1" reported ready and then failed every turn far from the typo.
        problem = url_problem(self.base_url)
        if problem is not None:
            raise ValueError(f"base_url: {problem}")
        structs.force_setattr(self, "base_url", self.base_url.strip())

    def api_key(self, environ: dict[str, str] | None = None) -> str:
        """Read the key from the named variable ("" when unset)."""
        env = os.environ if environ is None else environ
        return env.get(self.api_key_env, "") if self.api_key_env else ""


class SignInEvidence(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One sign that an agent is signed in: a variable set, or a file (holding ``contains``)."""

    env: str | None = None
    file: str | None = None
    """A path; ``~`` and ``${VAR}`` / ``${VAR:-default}`` are expanded."""
    contains: str | None = None


class AgentConfig(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One agent: a built-in catalog entry, or a table of the user's agents file
    (`comand = …` is an error: it must not be an agent without a command)."""

    name: str
    kind: Literal["demo", "copilot", "acp"]
    title: str = ""
    """What it is, in a few words ("GitHub Copilot CLI")."""
    install: str = ""
    """How to install it (a command), said when it is not found."""
    sign_in: str = ""
    """How to sign in or set a key, said when it is not signed in."""
    signed_in: list[SignInEvidence] = msgspec.field(default_factory=list)
    """Any one of these says it is signed in; none listed: nothing to check."""
    pass_env: list[str] = msgspec.field(default_factory=list)
    """Variables of ours an ACP agent gets as they are (``NAME``, or ``PREFIX_*``)."""
    command: str | None = None
    """Executable: the Copilot CLI path, or the ACP agent command. None = the default."""
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
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
    sandbox_writable: list[str] = msgspec.field(default_factory=list)
    """Its own state folders, writable in its sandbox (``~`` and ``${VAR:-default}`` expanded
    in its environment): its sessions, logs and caches."""
    sandbox_read_only: list[str] = msgspec.field(default_factory=list)
    """Folders inside those state folders kept read-only in its sandbox (made when missing):
    what the agent, run outside a sandbox later, runs as code (Copilot's auto-update ``pkg``)."""

    def __post_init__(self) -> None:
        for name in self.pass_env:
            if problem := pass_env_problem(name):
                raise ValueError(f"pass_env: {problem}")

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


class InvalidSettings(ValueError):
    """Values that do not make a record of ours: where (``loc``, the key path), which kind of
    problem (:data:`UNKNOWN_KEY`, ``missing`` or ``invalid``) and why, in words."""

    def __init__(self, loc: tuple[str, ...], kind: str, why: str) -> None:
        self.loc, self.kind, self.why = loc, kind, why
        super().__init__(f"{'.'.join(loc)}: {why}" if loc else why)

    def errors(self) -> list[dict[str, Any]]:
        """The problem as domain/entry_errors.py reads it (one: the first found)."""
        return [{"loc": self.loc, "type": self.kind, "msg": self.why}]


def checked(cls: type[T], values: Any, *, text: bool = False) -> T:
    """``values`` (a mapping of the fields, nested tables as mappings) as a ``cls``; text
    read as numbers and booleans when ``text`` (variables and ``.env`` hold only text).
    :class:`InvalidSettings` names the first wrong field. ``~`` in a path is the home folder."""
    try:
        return msgspec.convert(_as_read(cls, values) if text else values, cls, strict=not text, dec_hook=_path)
    except msgspec.ValidationError as exc:
        raise _invalid(cls, str(exc)) from None


_BOOL_WORDS = {
    **dict.fromkeys(("1", "true", "t", "yes", "y", "on"), True),
    **dict.fromkeys(("0", "false", "f", "no", "n", "off"), False),
}
"""The words a yes/no setting takes as text: pydantic's, which POLYPILOT_RECORD=off relied on
(msgspec's lax reading knows only true/false/1/0)."""


def _as_read(cls: Any, values: Any) -> Any:
    """``values`` with each text meant for a yes/no or a number as pydantic read it: a yes/no
    word as its bool and a number's blanks left out (`` 5`` in a ``.env``); the rest as it is."""
    if not (isinstance(values, Mapping) and isinstance(cls, type) and issubclass(cls, Struct)):
        return values
    read = dict(values)
    for name, value in values.items():
        hint = type_at(cls, (name,)) if isinstance(name, str) else Any
        if isinstance(value, Mapping):
            read[name] = _as_read(hint, value)
        elif not isinstance(value, str):
            continue
        elif hint is bool:
            read[name] = _BOOL_WORDS.get(value.strip().lower(), value)
        elif hint in (int, float):
            read[name] = value.strip()
    return read


def _path(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str | os.PathLike):
        # "~/state" in config.toml or a quoted variable is the home folder, never a "~" folder here.
        return Path(value).expanduser()
    raise TypeError(f"expected a path, got {type(value).__name__}")


def _invalid(cls: type, message: str) -> InvalidSettings:
    """msgspec's message in our words, with the field's path."""
    problem = read_problem(cls, message)
    loc = tuple(str(step) for step in problem.path if step != "...")  # msgspec names no table's key
    if problem.kind == "missing":
        return InvalidSettings((*loc, problem.said), "missing", "Field required")
    if problem.kind == "unknown":
        return InvalidSettings((*loc, problem.said), UNKNOWN_KEY, "unknown key")
    if problem.kind == "choice" and problem.choices():
        # msgspec repeats the refused value (pydantic did not): a key pasted into the wrong
        # line must not be shown in the dashboard, by `polypilot agents` or in a log.
        return InvalidSettings(loc, "invalid", f"{REDACTOR.text(problem.said)} is not one of {problem.choices()}")
    field, _, why = problem.said.partition(": ")  # a record's own check names its field first
    if problem.kind == "own" and why and field in getattr(type_at(cls, problem.path), "__struct_fields__", ()):
        return InvalidSettings((*loc, field), "invalid", why)
    return InvalidSettings(loc, "invalid", problem.said)


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


NO_KEYS_HERE = (
    "keys never go in the agents file: put it in an environment variable and name that variable with api_key_env"
)


def demo_agent() -> AgentConfig:
    """The built-in offline agent."""
    return AgentConfig(name=DEMO_AGENT, kind="demo")


_ENTRY_KEYS = {  # what an agents-file entry and its tables may hold (for "did you mean")
    "": [n for n in AgentConfig.__struct_fields__ if n != "name"],
    "provider": list(ProviderConfig.__struct_fields__),
    "signed_in": list(SignInEvidence.__struct_fields__),
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
        errors = key_problems(table)  # every one at once: the model's check stops at its first
        if not errors:
            try:
                agents[name] = checked(AgentConfig, {**table, "name": name})
                continue
            except InvalidSettings as exc:
                errors = exc.errors()
        skip(name, *entry_problem(errors, _ENTRY_KEYS, lines, name))
    return AgentCatalog(agents, tuple(skipped.values()), skipped)


def key_problems(table: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every key of an agents-file entry, and of its provider and sign-in tables, that is no
    field, as problems (domain/entry_errors.py); a provider's literal key first of all."""
    provider = table.get("provider")
    if isinstance(provider, Mapping) and "api_key" in provider:
        return [{"loc": ("provider", "api_key"), "type": "invalid", "msg": NO_KEYS_HERE}]
    found: list[tuple[str, ...]] = [(key,) for key in table if key not in _ENTRY_KEYS[""]]
    if isinstance(provider, Mapping):
        found += [("provider", key) for key in provider if key not in _ENTRY_KEYS["provider"]]
    signs = table.get("signed_in")
    for index, sign in enumerate(signs if isinstance(signs, list) else []):
        if isinstance(sign, Mapping):
            found += [("signed_in", str(index), key) for key in sign if key not in _ENTRY_KEYS["signed_in"]]
    return [{"loc": loc, "type": UNKNOWN_KEY, "msg": "unknown key"} for loc in found]


def read_agents_file(path: Path) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    """Its tables and the line of each key; AgentsFileError when it is missing, too large or not TOML."""
    try:
        tables, text = read_toml_text(Path(path), "agents file", MAX_AGENTS_FILE_BYTES, AgentsFileError)
    except FileNotFoundError:
        raise AgentsFileError(f"agents file {path} does not exist") from None
    return tables, toml_key_lines(text)
