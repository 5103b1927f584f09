"""What starting an agent's command reads of it, and a strict reading of that from a raw table.

An agent's command line and environment (locate.py ``find_command``, copilot/cli_spec.py)
need only its command, args, env, model and provider: :class:`CliAgent` says so, and the
validated ``AgentConfig`` meets it. :func:`plain_copilot` reads the same from the agents
file's raw table, without the models, for a headless run's head start (head_start.py) — and
only when the table is plain: a Copilot agent with no sandbox and no network rule, every key
it sets of the type the model takes unchanged. Anything else is None (no head start);
whatever it reads is checked against the validated configuration before the CLI is used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from polypilot_tui.domain.pass_env import pass_env_problem
from polypilot_tui.domain.urls import url_problem

if TYPE_CHECKING:  # types only: a head start imports this module before anything else
    from collections.abc import Sequence
    from typing import Protocol

    class CliProvider(Protocol):
        """A model provider of one's own (config.py ``ProviderConfig``)."""

        @property
        def type(self) -> str: ...
        @property
        def base_url(self) -> str: ...
        @property
        def api_key_env(self) -> str | None: ...
        @property
        def wire_api(self) -> str | None: ...
        def api_key(self, environ: dict[str, str] | None = None) -> str: ...

    class CliAgent(Protocol):
        """What starting an agent's command reads of it (config.py ``AgentConfig``)."""

        @property
        def name(self) -> str: ...
        @property
        def kind(self) -> str: ...
        @property
        def command(self) -> str | None: ...
        @property
        def args(self) -> Sequence[str]: ...
        @property
        def env(self) -> Mapping[str, str]: ...
        @property
        def model(self) -> str | None: ...
        @property
        def provider(self) -> CliProvider | None: ...


class RawProvider(NamedTuple):
    """A ``provider`` table read as it is."""

    type: str
    base_url: str
    api_key_env: str | None
    wire_api: str | None

    def api_key(self, environ: dict[str, str] | None = None) -> str:
        """The key from the named variable ("" when unset), as ``ProviderConfig.api_key``."""
        env = os.environ if environ is None else environ
        return env.get(self.api_key_env, "") if self.api_key_env else ""


class RawAgent(NamedTuple):
    """A plain Copilot agent's table read as it is (:func:`plain_copilot`)."""

    name: str
    kind: str
    command: str | None
    args: tuple[str, ...]
    env: Mapping[str, str]
    model: str | None
    provider: RawProvider | None

    def __repr__(self) -> str:  # its env may hold keys: never in a repr, log or traceback
        return f"RawAgent(name={self.name!r}, command={self.command!r})"

    def missing_key(self, environ: Mapping[str, str]) -> bool:
        """The provider key variable it names is unset or empty (``AgentConfig.missing_key``)."""
        provider = self.provider
        return provider is not None and bool(provider.api_key_env) and not provider.api_key({**environ, **self.env})


PROVIDER_KEYS = frozenset({"type", "base_url", "api_key_env", "wire_api"})
PROVIDER_TYPES = frozenset({"openai", "azure", "anthropic"})
SIGN_IN_KEYS = frozenset({"env", "file", "contains"})


def plain_copilot(name: str, table: Mapping[str, Any]) -> RawAgent | None:
    """Agent ``name``'s ``table`` (the built-in's merged with the agents file's) read strictly,
    or None when it is anything but a plain Copilot agent that starts with no sandbox: every
    key one the model knows and of the type it takes as it is (``AgentConfig`` in config.py),
    none that is a sandbox (``sandbox`` other than ``"off"``, ``network``)."""
    if table.get("kind") != "copilot" or table.get("sandbox", "off") != "off":
        return None
    if not all(key in PLAIN_CHECKS and PLAIN_CHECKS[key](value) for key, value in table.items()):
        return None
    provider = _provider(table["provider"]) if "provider" in table else None
    if "provider" in table and provider is None:
        return None
    args, env = table.get("args") or [], table.get("env") or {}
    return RawAgent(name, "copilot", table.get("command"), tuple(args), dict(env), table.get("model"), provider)


def _provider(table: Any) -> RawProvider | None:
    if not isinstance(table, dict) or not PROVIDER_KEYS.issuperset(table):
        return None
    kind, url, key_env, wire = (table.get(key) for key in ("type", "base_url", "api_key_env", "wire_api"))
    kind = "openai" if kind is None else kind
    if kind not in PROVIDER_TYPES or not isinstance(url, str) or url_problem(url) is not None:
        return None
    if not (_optional_text(key_env) and _optional_text(wire)):
        return None
    return RawProvider(kind, url.strip(), key_env, wire)


def _optional_text(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _text_table(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _signs(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(sign, dict) and SIGN_IN_KEYS.issuperset(sign) and _text_table(sign) for sign in value
    )


PLAIN_CHECKS: dict[str, Callable[[Any], bool]] = {
    "kind": lambda value: value == "copilot",
    "sandbox": lambda value: value == "off",
    "title": lambda value: isinstance(value, str),
    "install": lambda value: isinstance(value, str),
    "sign_in": lambda value: isinstance(value, str),
    "command": _optional_text,
    "model": _optional_text,
    "cwd": lambda value: isinstance(value, str) and value != "",
    "args": _texts,
    "pass_env": lambda value: _texts(value) and not any(pass_env_problem(name) for name in value),
    "sandbox_writable": _texts,
    "sandbox_read_only": _texts,
    "env": _text_table,
    "signed_in": _signs,
    "provider": lambda value: isinstance(value, dict),
}
"""The keys a plain table may hold, each with the type it must have: no ``network`` (a
network rule is a sandbox), no ``script``, no ``name``; ``sandbox`` only as ``"off"``."""
