"""A ``copilot`` on PATH from ``npm install -g @github/copilot`` is a Node loader that runs the
platform package's binary beside it; a session starts that binary itself (agents/copilot/cli_spec.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from polypilot_tui.agents.copilot.cli_spec import NODE_ARCH, platform_binary, spec_of
from polypilot_tui.agents.npm_cache import COPILOT_CLI
from polypilot_tui.config import AgentConfig

GLIBC_LINUX = sys.platform == "linux" and bool(os.confstr("CS_GNU_LIBC_VERSION"))
ARCH = NODE_ARCH.get(os.uname().machine.lower(), "")
needs_glibc = pytest.mark.skipif(not (GLIBC_LINUX and ARCH), reason="the layout of a glibc Linux install")


def npm_layout(
    root: Path, *, nested: bool = True, binary: bool = True, executable: bool = True, version: str = "1.0.1"
) -> Path:
    """An npm prefix as ``npm install -g @github/copilot`` leaves it (the platform package in the
    loader's own ``node_modules``; ``nested=False``: beside it, as a project's install hoists it);
    its ``bin/copilot``."""
    modules = root / "lib" / "node_modules" / "@github"
    (modules / "copilot").mkdir(parents=True)
    (modules / "copilot" / "package.json").write_text('{"name": "@github/copilot", "version": "1.0.1"}')
    (modules / "copilot" / "npm-loader.js").write_text("#!/usr/bin/env node\n")
    (modules / "copilot" / "npm-loader.js").chmod(0o755)
    platform = (modules / "copilot" / "node_modules" / "@github" if nested else modules) / f"copilot-linux-{ARCH}"
    platform.mkdir(parents=True)
    (platform / "package.json").write_text(f'{{"name": "@github/copilot-linux-{ARCH}", "version": "{version}"}}')
    if binary:
        (platform / "copilot").write_text("#!/bin/sh\n")
        (platform / "copilot").chmod(0o755 if executable else 0o644)
    (root / "bin").mkdir()
    (root / "bin" / "copilot").symlink_to(modules / "copilot" / "npm-loader.js")
    return root / "bin" / "copilot"


@needs_glibc
@pytest.mark.parametrize("nested", [True, False], ids=["global install", "hoisted"])
def test_the_loader_on_path_is_replaced_by_its_platform_binary(tmp_path: Path, nested: bool) -> None:
    found = npm_layout(tmp_path, nested=nested)
    expected = next(tmp_path.rglob(f"copilot-linux-{ARCH}/copilot"))
    assert platform_binary(str(found)) == str(expected)
    spec = spec_of(AgentConfig(name="c", kind="copilot"), "copilot", {"PATH": str(found.parent)}, logged_in=True)
    assert str(expected) in spec.argv and str(found) not in spec.argv and "node" not in spec.argv


@needs_glibc
def test_a_stale_platform_package_higher_up_is_not_taken(tmp_path: Path) -> None:
    """Node takes the loader's own package first; a leftover of another version at the global
    root is what the loader would not run, so it is not run either."""
    found = npm_layout(tmp_path, nested=True)
    stale = tmp_path / "lib" / "node_modules" / "@github" / f"copilot-linux-{ARCH}"
    stale.mkdir()
    (stale / "package.json").write_text('{"version": "0.0.9"}')
    (stale / "copilot").write_text("#!/bin/sh\n")
    (stale / "copilot").chmod(0o755)
    assert platform_binary(str(found)) == str(
        tmp_path / "lib" / "node_modules" / "@github" / "copilot" / "node_modules" / "@github" / stale.name / "copilot"
    )


@needs_glibc
@pytest.mark.parametrize("layout", ["no binary", "not executable", "another version"])
def test_without_the_binary_the_loader_starts_it(tmp_path: Path, layout: str) -> None:
    found = npm_layout(
        tmp_path,
        binary=layout != "no binary",
        executable=layout != "not executable",
        version="1.0.0" if layout == "another version" else "1.0.1",
    )
    assert platform_binary(str(found)) is None
    spec = spec_of(AgentConfig(name="c", kind="copilot"), "copilot", {"PATH": str(found.parent)}, logged_in=True)
    assert str(found) in spec.argv


def test_anything_but_the_loader_is_started_as_it_is(tmp_path: Path) -> None:
    other = tmp_path / "@github" / "copilot" / "loader.js"  # the same folders, another file
    other.parent.mkdir(parents=True)
    other.write_text("")
    assert platform_binary(str(other)) is None
    assert platform_binary("/bin/true") is None
    assert platform_binary(str(tmp_path / "missing")) is None


@needs_glibc
def test_the_real_loader_and_its_binary_are_the_same_cli() -> None:
    """The pinned CLI's npm install (the real-agent tests' cache): its loader resolves to the
    binary the tests start, and both say the same version."""
    if not COPILOT_CLI.installed():
        pytest.skip(f"{COPILOT_CLI.package} is not installed in {COPILOT_CLI.prefix}")
    loader = COPILOT_CLI.prefix / "node_modules" / ".bin" / "copilot"
    assert platform_binary(str(loader)) == os.path.realpath(COPILOT_CLI.path)  # the cache may be a link
    said = [
        subprocess.run([str(cli), "--version"], capture_output=True, text=True, timeout=60).stdout
        for cli in (loader, COPILOT_CLI.path)
    ]
    assert said[0] == said[1] and "1.0.102" in said[0], said
