"""SIGTERM, SIGHUP and SIGINT end the dashboard the way a confirmed ctrl+q does.

Without this a ``kill`` or a closed terminal ended the process on the spot: the terminal
stayed in the alternate screen with mouse tracking on and no cursor (the user had to type
``reset``), drafts were lost, and running turns were not ended as interrupted (so they were
not offered for resending). Now the first of these signals asks the app to exit — the same
path as ctrl+q answered "Quit": drafts saved, turns in flight ended as interrupted, every
agent stopped, persistence flushed, the terminal restored — and the exit code is
``128 + the signal number`` (143 for SIGTERM, 129 for SIGHUP, 130 for SIGINT), as a shell
reports a process the signal ended.

SIGHUP usually means the terminal is gone. When it no longer answers, the app's terminal
descriptors are pointed away from it before the app quits (ui/terminal.py): restoring a
terminal that is gone writes nowhere instead of failing. A SIGHUP sent by hand to a live
terminal leaves it alone, and the terminal is restored.

Later signals during the quit are ignored (a hangup often brings a SIGHUP from the terminal
and another from the terminal's owner; leaving at the second would lose what the first is
saving). So that the quit itself can never hang the process, a guard thread ends it with the
same exit code :data:`GUARD_SECONDS` after the first signal; the agents still die with it
(agents/leash.py) and the kernel releases the state-folder lock.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from polypilot_tui.ui.terminal import detach, terminal_fds, terminal_gone

log = logging.getLogger(__name__)

QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
GUARD_SECONDS = 60.0
"""The longest a quit on a signal may take before the process leaves anyway."""


class Exits(Protocol):
    """What is asked of the app: Textual's ``App.exit``."""

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None: ...


TERMINAL_CHECK_SECONDS = 2.0
"""How often the terminal is asked whether it is still there (one ioctl)."""


def exit_code(signo: int) -> int:
    """The exit code of a quit on ``signo`` (what a shell shows for a process it ended)."""
    return 128 + signo


class QuitOnSignal:
    """The handler of :data:`QUIT_SIGNALS`: the first asks the app to exit, later ones are ignored."""

    def __init__(
        self,
        app: Exits,
        *,
        ttys: Sequence[int] | None = None,
        guard: float = GUARD_SECONDS,
        hard_exit: Callable[[int], object] = os._exit,
    ) -> None:
        self._app = app
        self._ttys = terminal_fds() if ttys is None else list(ttys)
        """The standard descriptors that are terminals (found before anything can hang them up)."""
        self._guard = guard
        self._hard_exit = hard_exit
        self.received: int | None = None
        """The signal the quit began with."""
        self.detached = False
        """The terminal was gone, and output was pointed at /dev/null."""

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        for signo in QUIT_SIGNALS:
            loop.add_signal_handler(signo, self, signo)
        if self._ttys:
            loop.call_later(TERMINAL_CHECK_SECONDS, self.watch_terminal, loop)

    def watch_terminal(self, loop: asyncio.AbstractEventLoop) -> None:
        """Quit as on SIGHUP when the terminal is gone without one (its other end closed while
        the hangup went to another process group): its input then reads as endless empty
        reads, and the driver's input thread would spin on them for good."""
        if self.received is not None:
            return
        if terminal_gone(self._ttys):
            log.warning("the terminal is gone and no SIGHUP came")
            self(signal.SIGHUP)
            return
        loop.call_later(TERMINAL_CHECK_SECONDS, self.watch_terminal, loop)

    def __call__(self, signo: int) -> None:
        name = signal.Signals(signo).name
        if self.received is not None:
            log.info("%s during the quit: ignored", name)
            return
        self.received = signo
        code = exit_code(signo)
        log.warning("%s: quitting (turns in flight end as interrupted, drafts are saved)", name)
        if terminal_gone(self._ttys):
            detach(self._ttys)
            self.detached = True
        timer = threading.Timer(self._guard, self._give_up, (name, code))
        timer.daemon = True
        timer.start()
        self._app.exit(code, return_code=code)

    def _give_up(self, name: str, code: int) -> None:
        log.error("the quit on %s did not end within %.0f s; leaving now", name, self._guard)
        self._hard_exit(code)
