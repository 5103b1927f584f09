"""How a process ended, in words: ``exit code 3``, or ``killed by SIGKILL (9)`` — never the
``code -9`` a negative return code reads as (asyncio and subprocess give a signal that way)."""

from __future__ import annotations

import re
import signal

_SIGNALLED = re.compile(r"\b(?:exited with |exit )?code (-\d+)\b")


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 77`` for a number no signal has here."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_text(code: int | None) -> str:
    """``exit code 3`` for an exit, ``killed by SIGKILL (9)`` for a negative return code (a
    signal), ``exit code unknown`` when there is none."""
    if code is None:
        return "exit code unknown"
    if code >= 0:
        return f"exit code {code}"
    return f"killed by {signal_name(-code)} ({-code})"


def signals_named(text: str) -> str:
    """Another's message (an SDK's ``CLI process exited with code -9``) with the signal named:
    ``CLI process killed by SIGKILL (9)``."""
    return _SIGNALLED.sub(lambda match: exit_text(int(match.group(1))), text)
