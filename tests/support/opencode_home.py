"""A warm opencode config folder for each test's fresh home, made once per opencode version.

On every start opencode makes sure its config folder (``$XDG_CONFIG_HOME/opencode``) holds
its plugin SDK: when the folder has no ``node_modules`` it installs ``@opencode-ai/plugin``
there from registry.npmjs.org in the background (≈64 MB unpacked; measured on 1.18.33: ≈14 s
of CPU for a start and a turn on a fresh home against ≈5 s on a warm one). Nothing waits for that install unless
the folder has custom tools or plugins, which no test has, so on a fresh home it only competes
with the test for the CPU and needs the network. A folder whose ``node_modules`` exists and
whose ``package-lock.json`` names every dependency of its ``package.json`` is left alone.

So the first test that needs one lets the real opencode do that install once, in a home of its
own, and keeps the resulting folder under the npm install (``<prefix>/warm-config``, the
checkout's ignored .cache). Each test's home then gets its own copy: its own folders and
small files, the unpacked packages hard-linked (read-only; opencode only reads them once they
are installed). Everything else in the home (data, state, cache) stays fresh.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import tempfile
import warnings
from pathlib import Path

from polypilot_tui.agents.npm_cache import OPENCODE
from tests.support.waiting import until_blocking

#: Where the warm config folder of the pinned opencode is kept.
TEMPLATE = OPENCODE.prefix / "warm-config"
PLUGIN = "@opencode-ai/plugin"
#: What the install leaves in the folder (the rest, e.g. its .gitignore, opencode writes at each start).
INSTALLED = ("node_modules", "package.json", "package-lock.json")
#: A first install from the registry takes ≈5 s; a slow mirror gets much longer.
INSTALL_SECONDS = 240.0

_failed: str | None = None
"""Why this process could not make the template (it is tried once per process)."""


def warm_config(binary: Path, config_home: Path, env: dict[str, str]) -> None:
    """Give ``config_home/opencode`` a private copy of the warm config folder (made on first use
    with ``binary`` and ``env``, the variables the test will start opencode with). When the
    folder cannot be made (no registry) the home stays cold, as before, with a warning."""
    template = _template(binary, env)
    if template is not None:
        _copy(template, config_home / "opencode")


def _template(binary: Path, env: dict[str, str]) -> Path | None:
    global _failed
    if _failed is None and not TEMPLATE.is_dir():
        try:
            _make(binary, env)
        except (OSError, AssertionError, subprocess.SubprocessError) as exc:
            _failed = f"{type(exc).__name__}: {exc}"
    if _failed is None and not _installed(TEMPLATE):
        # Someone changed it since (it is kept between runs): opencode would install again.
        _failed = f"{TEMPLATE} is not a finished install: delete it to make it again"
    if _failed is not None:
        warnings.warn(f"opencode starts with a cold config folder ({_failed})", stacklevel=3)
        return None
    return TEMPLATE


def _installed(folder: Path) -> bool:
    """opencode's own test (1.18.33 ``Npm.install``): node_modules exists and the lock names
    every dependency; plus the SDK really unpacked."""
    try:
        wanted = json.loads((folder / "package.json").read_text()).get("dependencies", {})
        locked = json.loads((folder / "package-lock.json").read_text())["packages"][""].get("dependencies", {})
    except (OSError, ValueError, KeyError):
        return False
    unpacked = folder / "node_modules" / PLUGIN / "package.json"
    # The hidden lockfile is the last thing npm's reify writes.
    done = folder / "node_modules" / ".package-lock.json"
    return PLUGIN in locked and set(wanted) <= set(locked) and unpacked.is_file() and done.is_file()


def _make(binary: Path, env: dict[str, str]) -> None:
    """Start ``opencode acp`` in a home of its own until its background install is done; keep
    its config folder as :data:`TEMPLATE` (whole or not at all; file-locked across workers)."""
    TEMPLATE.parent.mkdir(parents=True, exist_ok=True)
    with open(TEMPLATE.parent / ".warm-config.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if TEMPLATE.is_dir():
            return
        with tempfile.TemporaryDirectory(dir=TEMPLATE.parent, prefix=".warm-config-") as scratch:
            home = Path(scratch)
            names = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")
            dirs = {name: home / name.lower() for name in names}
            for path in dirs.values():
                path.mkdir()
            folder = dirs["XDG_CONFIG_HOME"] / "opencode"
            log = dirs["XDG_DATA_HOME"] / "opencode" / "log"
            child_env = {**os.environ, **env, "HOME": str(home), **{k: str(v) for k, v in dirs.items()}}
            # stdin stays open: opencode acp ends at its end of input.
            with subprocess.Popen(
                [str(binary), "acp"],
                cwd=home,
                env=child_env,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ) as process:
                try:

                    def settled() -> str | None:
                        if _installed(folder):
                            return "installed"
                        if process.poll() is not None:
                            return f"opencode exited ({process.returncode})"
                        failed = [p for p in log.glob("*.log") if "dependency install failed" in p.read_text()]
                        return "the install failed (opencode's log)" if failed else None

                    outcome = until_blocking(settled, INSTALL_SECONDS, f"opencode's install of {PLUGIN}", every=0.2)
                finally:
                    process.terminate()
                    try:
                        process.wait(10)
                    except subprocess.TimeoutExpired:
                        process.kill()
            if outcome != "installed":
                raise AssertionError(outcome)
            for path in (folder / "node_modules").rglob("*"):
                if path.is_file() and not path.is_symlink():
                    path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
            kept = folder.parent / "kept"
            kept.mkdir()
            for name in INSTALLED:
                (folder / name).rename(kept / name)
            kept.rename(TEMPLATE)


def _copy(template: Path, folder: Path) -> None:
    """Folders and the package files (opencode's to rewrite) copied, the unpacked packages
    hard-linked (copied when the test's tmp is on another file system)."""

    def link(source: str, target: str) -> None:
        if os.path.basename(source).startswith("."):  # npm's own bookkeeping (.package-lock.json): it rewrites
            shutil.copy2(source, target)  # those in place, and as root a read-only link would not stop it
            return
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template / "node_modules", folder / "node_modules", symlinks=True, copy_function=link)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(template / name, folder / name)
