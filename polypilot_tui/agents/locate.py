"""Finding an agent's command and its sign-in files, as a user's machine has them.

A command is looked for on PATH, then in the folders npm, pipx, volta and bun install into
(a login shell adds them to PATH; a dashboard started from a desktop launcher may not have
them), then in polypilot's own npm cache of pinned agents.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from polypilot_tui.agents.npm_cache import CODEX_ACP, COPILOT_CLI, OPENCODE, NpmAgent

if TYPE_CHECKING:
    from polypilot_tui.agents.raw_agent import CliAgent
    from polypilot_tui.config import AgentConfig

#: Where installers put commands that a non-login PATH may lack.
USER_BIN_DIRS = (
    "~/.local/bin",
    "~/.npm-global/bin",
    "~/.volta/bin",
    "~/.bun/bin",
    "~/.nvm/versions/node/*/bin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
)
PINNED: dict[str, NpmAgent] = {Path(a.binary).name: a for a in (COPILOT_CLI, OPENCODE, CODEX_ACP)}
"""The agents polypilot's npm cache may hold, by command name."""

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def argv_of(agent: CliAgent) -> list[str]:
    """The command line an agent's config names: ``command`` (split like a shell when it holds
    arguments and ``args`` is empty; ``copilot`` for a Copilot agent without one), then ``args``.
    Empty when an ACP agent names no command."""
    command = (agent.command or "").strip() or ("copilot" if agent.kind == "copilot" else "")
    if not command:
        return []
    words = shlex.split(command) if not agent.args and " " in command else [command]
    return [*words, *agent.args]


def find_command(agent: CliAgent, environ: Mapping[str, str] | None = None) -> str | None:
    """Where the agent's executable is, looked for with its own variables over ``environ``."""
    argv = argv_of(agent)
    if not argv:
        return None
    env = {**(os.environ if environ is None else environ), **agent.env}
    return locate(argv[0], env.get("PATH"), env)


def locate(command: str, path: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The executable ``command`` names, or None. A command with a slash is taken as a path."""
    if os.sep in command:
        found = Path(command).expanduser()
        return str(found) if _runnable(found) else None
    on_path = shutil.which(command, path=path)
    if on_path:
        return on_path
    env = os.environ if environ is None else environ
    for folder in _install_folders(env):
        candidate = Path(folder) / command
        if _runnable(candidate):
            return str(candidate)
    pinned = PINNED.get(command)
    return str(pinned.path) if pinned is not None and pinned.installed() else None


def not_runnable(command: str, path: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """When :func:`locate` finds nothing: the file of that name that is there but cannot be run
    (not executable, or a folder), said with the fix; None when there is no such file at all."""
    env = os.environ if environ is None else environ
    if os.sep in command:
        candidates = [Path(command).expanduser()]
    else:
        search = env.get("PATH", os.defpath) if path is None else path
        folders = [*(f for f in search.split(os.pathsep) if f), *_install_folders(env)]
        candidates = [Path(folder) / command for folder in folders]
    for candidate in candidates:
        # os.path's tests say False for what cannot be looked at (a PATH folder the user may
        # not search); Path's raise PermissionError there.
        if os.sep in command and os.path.isdir(candidate):
            return f"{candidate} is a folder, not a program"
        if os.path.isfile(candidate) and not os.access(candidate, os.X_OK):
            return f"{candidate} is not executable (make it so with: chmod +x {shlex.quote(str(candidate))})"
    return None


def _runnable(path: Path) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _install_folders(env: Mapping[str, str]) -> list[str]:
    """The folders npm, pipx, volta and bun install into, newest node first."""
    prefix = env.get("NPM_CONFIG_PREFIX", "")
    folders = [f"{prefix}/bin"] if prefix else []
    for pattern in USER_BIN_DIRS:
        folders += sorted(glob.glob(expand(pattern, env)), reverse=True)
    return folders


def missing_command(agent: AgentConfig, environ: Mapping[str, str] | None = None) -> str:
    """Why the agent's command cannot be run, when :func:`find_command` finds nothing: the file
    that is there but cannot be run, else that it is not found (with the install command)."""
    argv = argv_of(agent)
    command = argv[0] if argv else f"(none: set `command` for {agent.name})"
    env = dict(os.environ if environ is None else environ) | agent.env
    if argv and (unrunnable := not_runnable(command, env.get("PATH"), env)):
        return unrunnable
    install = f"; install it with: {agent.install}" if agent.install else ""
    return f"its command {command} is not found{install}"


def expand(text: str, environ: Mapping[str, str]) -> str:
    """``~``, ``${VAR}`` and ``${VAR:-default}`` expanded from ``environ`` (an unset VAR is "")."""

    def value(match: re.Match[str]) -> str:
        found = environ.get(match.group(1), "")
        return found if found else (match.group(2) or "")

    expanded = _VARIABLE.sub(value, text)
    if expanded == "~" or expanded.startswith("~/"):
        expanded = (environ.get("HOME") or str(Path.home())) + expanded[1:]
    return expanded
