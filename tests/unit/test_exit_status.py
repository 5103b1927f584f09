"""A process's end in words: a signal is named (``killed by SIGKILL (9)``), never ``code -9``."""

from __future__ import annotations

import asyncio
import signal

from polypilot_tui.domain.exit_status import exit_text, signals_named
from polypilot_tui.workspace.git import GitResult, describe


def test_exits_and_signals_are_said_in_words() -> None:
    assert exit_text(0) == "exit code 0" and exit_text(3) == "exit code 3"
    assert exit_text(-9) == "killed by SIGKILL (9)"
    assert exit_text(-15) == "killed by SIGTERM (15)" and exit_text(-11) == "killed by SIGSEGV (11)"
    assert exit_text(-200) == "killed by signal 200 (200)" and exit_text(None) == "exit code unknown"


def test_an_sdks_message_gets_the_signal_named() -> None:
    assert signals_named("CLI process exited with code -9") == "CLI process killed by SIGKILL (9)"
    assert signals_named("server ended (exit code -6)") == "server ended (killed by SIGABRT (6))"
    assert signals_named("CLI process exited with code 1") == "CLI process exited with code 1"


async def test_the_real_return_code_of_a_killed_process_reads_as_its_signal() -> None:
    proc = await asyncio.create_subprocess_exec("sleep", "30")
    proc.send_signal(signal.SIGKILL)
    code = await proc.wait()
    assert exit_text(code) == "killed by SIGKILL (9)"
    assert describe(GitResult(code, b"", "", False)) == "killed by SIGKILL (9)"
