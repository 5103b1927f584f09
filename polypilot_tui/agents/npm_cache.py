"""Pinned agent CLIs installed from npm into a cache folder.

The real-agent tests install the Copilot CLI, opencode and codex-acp here, and the app
falls back to these installs when the command is not on PATH. The folder is
``POLYPILOT_NPM_CACHE`` (the test suite points it at the checkout's ignored ``.cache/npm``),
else the user's cache folder: an installed wheel has no checkout to put it in.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import platformdirs

from polypilot_tui.domain.exit_status import exit_text
from polypilot_tui.infra.private import open_private, private_dir

CACHE_ROOT = Path(os.environ.get("POLYPILOT_NPM_CACHE") or Path(platformdirs.user_cache_dir("polypilot")) / "npm")


class NpmAgent(NamedTuple):
    """A pinned npm package and the native binary inside it (a tuple: a headless run's head
    start finds its CLI here before ``dataclasses`` is imported)."""

    package: str
    version: str
    binary: str
    """Path of the executable relative to node_modules."""

    @property
    def prefix(self) -> Path:
        safe = self.package.replace("/", "__").replace("@", "")
        return CACHE_ROOT / f"{safe}-{self.version}"

    @property
    def path(self) -> Path:
        return self.prefix / "node_modules" / self.binary

    def installed(self) -> bool:
        return os.path.isfile(self.path) and os.access(self.path, os.X_OK)  # False, not an error, when unreadable


COPILOT_CLI = NpmAgent("@github/copilot", "1.0.102", "@github/copilot-linux-x64/copilot")
OPENCODE = NpmAgent("opencode-ai", "1.18.33", "opencode-linux-x64/bin/opencode")
CODEX_ACP = NpmAgent("@zed-industries/codex-acp", "0.16.0", "@zed-industries/codex-acp-linux-x64/bin/codex-acp")


class NpmUnavailable(RuntimeError):
    """npm is missing or the install failed; the message says which."""


def ensure_installed(agent: NpmAgent, timeout: float = 900.0) -> Path:
    """Install ``agent`` once (file-locked, safe across pytest-xdist workers); return its binary."""
    if agent.installed():
        return agent.path
    npm = shutil.which("npm")
    if npm is None:
        raise NpmUnavailable("npm is not on PATH")
    private_dir(agent.prefix)  # what runs from here must be nobody else's to change
    with os.fdopen(open_private(agent.prefix / ".install.lock", os.O_WRONLY | os.O_CREAT), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if agent.installed():
            return agent.path
        result = subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
                str(agent.prefix),
                f"{agent.package}@{agent.version}",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0 or not agent.installed():
            said = result.stderr[-2000:] or exit_text(result.returncode)
            raise NpmUnavailable(f"npm install {agent.package}@{agent.version} failed: {said}")
    return agent.path
