"""The user's check command, run for real: in the worktree, by the user's shell, with their
environment less the app's settings, output bounded (the end kept), a timeout that kills its
whole process group."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from polypilot_tui.workspace.check_command import run_check
from tests.support.waiting import until

USER_ENV = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "MY_SETTING": "mine"}


async def test_it_runs_in_the_folder_by_the_users_shell_without_the_apps_settings(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    env = {**USER_ENV, "SHELL": bash, "POLYPILOT_PROVIDER_KEY": "sk-secret-value-123", "GITHUB_TOKEN": "ghp_user"}
    result = await run_check(
        'echo "$0 $(pwd) ${POLYPILOT_PROVIDER_KEY:-none} $MY_SETTING $GITHUB_TOKEN"', str(tmp_path), 10, environ=env
    )
    assert result.exit_code == 0 and result.output == f"{bash} {tmp_path} none mine ghp_user\n"
    failed = await run_check(
        "echo out; echo err >&2; exit 3", str(tmp_path), 10, environ={**USER_ENV, "SHELL": "relative"}
    )
    assert (failed.exit_code, failed.output, failed.passed) == (3, "out\nerr\n", False)  # /bin/sh for a bad SHELL


async def test_its_output_is_bounded_keeping_the_end_and_saying_so(tmp_path: Path) -> None:
    result = await run_check("head -c 300000 /dev/zero | tr '\\0' a; echo; echo THE END", str(tmp_path), 10, limit=1000)
    assert result.exit_code == 0 and result.truncated
    head, _, kept = result.output.partition("\n")
    assert head == f"[{300_000 + 1 + 8 - 1000:,} bytes of earlier output left out]"
    assert len(kept) == 1000 and kept.endswith("a\nTHE END\n")
    escapes = await run_check("printf 'ok\\033]52;c;aGk=\\007\\033[2Jdone'", str(tmp_path), 10)
    assert escapes.output == "okdone"  # no clipboard, no screen clearing reaches a terminal


async def test_a_check_that_runs_too_long_is_killed_with_its_children(tmp_path: Path) -> None:
    result = await run_check("sleep 60 & echo $! > child; wait", str(tmp_path), 0.5)
    assert result.timed_out and result.exit_code is None and "did not end within 0.5 s" in result.error
    child = int((tmp_path / "child").read_text())

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        return Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"  # a zombie awaiting its reaper

    await until(gone, 10, "the check's child to be killed")


async def test_a_check_that_cannot_start_says_why(tmp_path: Path) -> None:
    result = await run_check("true", str(tmp_path / "gone"), 10)
    assert result.exit_code is None and "could not start" in result.error and not result.passed
