"""How a Copilot CLI is started: its command line and environment (:class:`ServerSpec`).

One place computes them, for a session (connection.py) and for a headless run's head start
(agents/head_start.py), which computes them before the models, the SDK or asyncio are imported
and then again from the validated settings, and takes its early CLI only if the two agree: so
this module imports only what that start needs (the models, the sandbox and the errors are
imported where they are used, never on a head start's way).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from polypilot_tui.agents.leash import leashed
from polypilot_tui.agents.locate import not_runnable
from polypilot_tui.domain.urls import url_problem
from polypilot_tui.infra.settings_sources import PROVIDER_URL_VARIABLE

if TYPE_CHECKING:
    from polypilot_tui.agents.raw_agent import CliAgent, CliProvider
    from polypilot_tui.agents.sandbox import SandboxPlan
    from polypilot_tui.config import AgentConfig

DEFAULT_BYOK_MODEL = "gpt-4.1"

#: Credentials the CLI would pick up on its own. Offline/BYOK sessions must not send them
#: anywhere, so they are dropped unless the agent config sets them explicitly. A session
#: signed in with GitHub keeps the GitHub tokens: they are how it signs in.
DROPPED_ENV: frozenset[str] = frozenset(
    {
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "COPILOT_GITHUB_TOKEN",
        "GH_ENTERPRISE_TOKEN",
        "GITHUB_ENTERPRISE_TOKEN",
        "COPILOT_SDK_AUTH_TOKEN",
        "COPILOT_PROVIDER_API_KEY",
        "COPILOT_PROVIDER_BEARER_TOKEN",
        "COPILOT_CONNECTION_TOKEN",
    }
)


GITHUB_TOKENS: frozenset[str] = frozenset({"GH_TOKEN", "GITHUB_TOKEN", "COPILOT_GITHUB_TOKEN"})


def byok_provider(agent: CliAgent, environ: Mapping[str, str]) -> CliProvider | None:
    """The model provider a session uses instead of GitHub's: the agent's ``provider``, else the
    one the CLI's own ``COPILOT_PROVIDER_*`` variables describe (the headless CLI ignores them
    for SDK sessions, so they are handed over as a provider), else None (GitHub sign-in)."""
    if agent.provider is not None:
        return agent.provider
    env = {**environ, **agent.env}
    base_url = env.get(PROVIDER_URL_VARIABLE, "").strip()
    if not base_url:
        return None
    from polypilot_tui.config import ProviderConfig, checked  # the models: a head start never comes here

    if problem := url_problem(base_url):
        from polypilot_tui.agents.base import BackendError

        # readiness says it first; this is the start's own guard
        raise BackendError(f"{PROVIDER_URL_VARIABLE}: {problem}")
    kind = env.get("COPILOT_PROVIDER_TYPE", "openai").strip() or "openai"
    given = {
        "type": kind if kind in ("openai", "azure", "anthropic") else "openai",
        "base_url": base_url,
        "api_key_env": "COPILOT_PROVIDER_API_KEY",
        "wire_api": env.get("COPILOT_PROVIDER_WIRE_API") or None,
    }
    return checked(ProviderConfig, given)


def build_env(agent: CliAgent, environ: Mapping[str, str]) -> dict[str, str]:
    """The CLI's full environment: ours minus credentials, plus the agent's, plus BYOK."""
    provider = byok_provider(agent, environ)
    dropped = DROPPED_ENV if provider is not None else DROPPED_ENV - GITHUB_TOKENS
    env = {k: v for k, v in environ.items() if k not in dropped}
    env.update(agent.env)
    if provider is not None:
        # The headless CLI refuses BYOK sessions unless offline mode and the base URL are
        # in its env as well as in the per-session provider (verified, see reference).
        env["COPILOT_OFFLINE"] = "true"
        env["COPILOT_PROVIDER_BASE_URL"] = provider.base_url
        env["COPILOT_PROVIDER_TYPE"] = provider.type
        if provider.wire_api:
            env["COPILOT_PROVIDER_WIRE_API"] = provider.wire_api
        if agent.model:
            env["COPILOT_MODEL"] = agent.model
    return env


def provider_dict(agent: CliAgent, environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The SDK ``provider=`` dict; the key comes from the env var the config names."""
    provider = byok_provider(agent, environ)
    if provider is None:
        return None
    out: dict[str, Any] = {"type": provider.type, "base_url": provider.base_url}
    key = provider.api_key({**environ, **agent.env})
    if key:
        out["api_key"] = key
    if provider.wire_api:
        out["wire_api"] = provider.wire_api
    return out


class ServerSpec(NamedTuple):
    """How a CLI is started: two sessions with equal specs share one process."""

    argv: tuple[str, ...]
    """The full argv before the SDK's own flags (the leash, the CLI, the agent's args)."""
    env: tuple[tuple[str, str], ...]
    """The CLI's whole environment, sorted (it may hold keys: never in a repr, log or traceback)."""
    logged_in: bool
    """Signed in with GitHub (no BYOK provider): the SDK then lets the CLI log in."""
    own: str = ""
    """A sandboxed session's token, which no other spec has: its CLI is its own, even where
    two sessions' sandboxes have the same argv ("": equal specs share one CLI)."""

    def __repr__(self) -> str:
        return f"ServerSpec(argv={self.argv!r}, logged_in={self.logged_in!r}, own={self.own!r})"


GITHUB_SIGN_IN = GITHUB_TOKENS | {"GH_HOST", "GH_CONFIG_DIR"}
"""How the CLI signs in with GitHub, when the environment has it."""


def cli_environment(agent: CliAgent, environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, Any] | None]:
    """The CLI's environment and the sessions' provider (None: signed in with GitHub)."""
    env = build_env(agent, environ)
    provider = provider_dict(agent, environ)
    if provider is not None:
        env.setdefault("COPILOT_MODEL", agent.model or DEFAULT_BYOK_MODEL)
    return env, provider


def spec_of(
    agent: CliAgent, cli: str, env: Mapping[str, str], *, logged_in: bool, sandbox: SandboxPlan | None = None
) -> ServerSpec:
    """How ``agent``'s CLI ``cli`` is started in ``env``, in its ``sandbox`` when it has one
    (whose binds are in the argv: a sandboxed session shares its CLI with no other session);
    BackendError when it cannot be."""
    found = shutil.which(cli, path=env.get("PATH")) if os.sep not in cli else cli
    if found is None or not os.access(found, os.X_OK):
        from polypilot_tui.agents.base import BackendError

        why = not_runnable(cli, env.get("PATH"), env) or f"{cli} is not found"
        raise BackendError(f"Copilot CLI cannot be started: {why}")
    found = platform_binary(found) or found
    # On a leash (agents/leash.py): the CLI and its tools form one process group that
    # dies with the app, however the app ends. The SDK appends its own flags after these.
    command = ["node", found] if found.endswith(".js") else [found]
    if sandbox is not None:  # imported only then: a headless run starts its CLI sooner
        from polypilot_tui.agents.sandbox import launch_argv
        from polypilot_tui.config import AgentConfig

        assert isinstance(agent, AgentConfig)  # a sandboxed CLI is a validated agent's (its pass_env)
        env = sandboxed_environment(agent, env)
        command = launch_argv(sandbox, command, server_cwd(), env)
    argv = leashed(command)
    # Signed in with GitHub (the user's /login or gh): the CLI's own sign-in is how it
    # works. With a provider of one's own, nothing may reach GitHub.
    own = _token() if sandbox is not None else ""
    return ServerSpec((*argv, *agent.args), tuple(sorted(env.items())), logged_in=logged_in, own=own)


NODE_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
"""Node's names (``process.arch``) for the machines the CLI ships a binary for."""


def platform_binary(found: str) -> str | None:
    """The CLI's own binary when ``found`` is the npm package's loader (``copilot`` on PATH
    after ``npm install -g @github/copilot``): a Node script whose only work is to run the
    binary of the platform package it depends on. Started directly, a session's CLI skips a
    Node process (~0.1 s of CPU and start on every CLI start, ~40 MiB while it runs) and is
    itself the process the SDK and the leash hold. The package is found as Node resolves it
    from the loader (its own ``node_modules`` first, then each folder above), and taken only
    at the loader's own version. None when ``found`` is anything else, or that binary is not
    there (musl, where the loader picks another package; another layout): the loader then
    starts it, as before."""
    if sys.platform == "linux":
        try:
            system = "linux" if os.confstr("CS_GNU_LIBC_VERSION") else None  # musl: linuxmusl, the loader's pick
        except (ValueError, OSError):
            system = None
    else:
        system = "darwin" if sys.platform == "darwin" else None
    arch = NODE_ARCH.get(os.uname().machine.lower()) if system is not None else None
    if arch is None:
        return None
    try:
        loader = Path(os.path.realpath(found))
        if loader.name != "npm-loader.js" or loader.parent.name != "copilot" or loader.parent.parent.name != "@github":
            return None
        version = _package_version(loader.parent)
        package = f"copilot-{system}-{arch}"
        for folder in (loader.parent, *loader.parent.parents):
            candidate = folder / "node_modules" / "@github" / package
            if (candidate / "package.json").is_file():  # the first one Node finds is the loader's
                binary = candidate / "copilot"
                same = version is not None and _package_version(candidate) == version
                return str(binary) if same and binary.is_file() and os.access(binary, os.X_OK) else None
    except (OSError, ValueError):
        return None
    return None


def _package_version(folder: Path) -> str | None:
    """The ``version`` of the npm package in ``folder`` (None when it says none)."""
    import json

    try:
        version = json.loads((folder / "package.json").read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError, AttributeError):
        return None
    return version if isinstance(version, str) and version else None


def sandboxed_environment(agent: AgentConfig, env: Mapping[str, str]) -> dict[str, str]:
    """What a sandboxed CLI gets of ``env``: what an ACP agent gets (PATH, HOME, locale,
    proxies, XDG_*, its ``pass_env``), the CLI's own ``COPILOT_*`` and its GitHub sign-in; not
    the rest of the user's environment (cloud keys, ``SSH_AUTH_SOCK``, the D-Bus address)."""
    from polypilot_tui.agents.acp.process import agent_environment

    kept = agent_environment(agent, env)
    return {k: v for k, v in env.items() if k in kept or k.startswith("COPILOT_") or k in GITHUB_SIGN_IN}


def server_cwd() -> str:
    """The CLI's own working directory: the user's home, not any session's folder (a
    session's worktree may be removed while the CLI serves others; tools use the session's)."""
    home = Path.home()
    return str(home) if home.is_dir() else "/"


def _token() -> str:
    import secrets

    return secrets.token_hex(8)
