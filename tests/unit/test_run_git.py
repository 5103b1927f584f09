"""A headless run in a git checkout asks git only what its session needs: where the checkout
is, its branch and commit. No ``git status`` and no change count, which read the whole tree
(a big checkout: ~0.15 s of CPU each, while the agent boots and again as the run ends) for
figures a run never shows. The real ``polypilot run`` command, the demo agent, real git."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.copilot_harness import run_env
from tests.workspace.repos import make_repo

ROOT = Path(__file__).resolve().parents[2]


def git_shim(tmp_path: Path) -> tuple[Path, Path]:
    """A folder holding a ``git`` that logs its arguments, then runs the real one; the log."""
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout.strip()
    shim, log = tmp_path / "bin", tmp_path / "calls.log"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n')
    (shim / "git").chmod(0o700)
    return shim, log


def test_a_run_in_a_checkout_reads_no_more_of_it_than_its_session_needs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files={"a.py": "A = 1\n", "pkg/b.py": "B = 1\n"})
    (repo / "a.py").write_text("A = 2\n")  # uncommitted and untracked work: a count would have something to do
    (repo / "new.py").write_text("N = 1\n")
    shim, log = git_shim(tmp_path)
    agents = tmp_path / "agents.toml"
    agents.write_text(f'[here]\nkind = "demo"\ncwd = "{repo}"\n')
    env = run_env(tmp_path / "state", agents, PATH=f"{shim}:{os.environ['PATH']}", HOME=str(tmp_path / "home"))
    done = subprocess.run(
        [sys.executable, "-m", "polypilot_tui", "run", "--agent", "here", "hello there"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "hello there" in done.stdout
    calls = [line.split() for line in log.read_text().splitlines()]
    assert all(words[0] == "--no-pager" for words in calls), calls  # every call is ours (no agent runs git)
    asked = sorted(words[1] for words in calls)
    assert asked == ["rev-parse", "rev-parse", "symbolic-ref"], asked
