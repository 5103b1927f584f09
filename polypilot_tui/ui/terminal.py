"""The terminal can go away under the dashboard (a closed window, a dropped SSH link).

A hung-up terminal fails every write with EIO. Textual writes the screen from a thread of its
driver, and one failed write ended that thread with a traceback; the next writes then queued
behind it, and a full queue would block the app for good. Two small pieces keep the app
working until it has quit properly:

- :class:`HangupSafeDriver` is Textual's Linux driver with an output that stops writing at
  the first failure instead of raising (the screen is gone; nothing is worth a crash);
- :func:`detach` points the terminal's output descriptors at ``/dev/null`` once it is gone,
  so the exit's last flush of stderr cannot fail (which would turn the exit code into 120).
  Input is left alone: the driver's input thread may be between a ``select`` and a ``read``
  of it, and a descriptor swapped under it could block that read for good.
"""

from __future__ import annotations

import logging
import os
import termios
from collections.abc import Sequence
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver

log = logging.getLogger(__name__)


class QuietOutput:
    """A text stream that ends output at its first failure instead of raising."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        if self.failed is None:
            try:
                self._stream.write(text)
            except OSError as exc:
                self._fail(exc)
        return len(text)

    def flush(self) -> None:
        if self.failed is None:
            try:
                self._stream.flush()
            except OSError as exc:
                self._fail(exc)

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def _fail(self, exc: OSError) -> None:
        self.failed = exc
        log.info("the terminal stopped taking output (%s); the screen is no longer drawn", exc)


class HangupSafeDriver(LinuxDriver):
    """Textual's Linux driver, whose screen writes end quietly when the terminal is gone."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        if self._file is not None:  # what its writer thread writes to (Textual types it a TextIOWrapper)
            self._file = QuietOutput(self._file)  # type: ignore[assignment]


def terminal_fds() -> list[int]:
    """The output descriptors that are terminals now (ask before a hangup can hide them)."""
    return [fd for fd in (1, 2) if os.isatty(fd)]


def terminal_gone(fds: Sequence[int]) -> bool:
    """One of ``fds`` (terminals when they were found) no longer answers: it was hung up."""
    for fd in fds:
        try:
            termios.tcgetattr(fd)
        except (termios.error, OSError):
            return True
    return False


def detach(fds: Sequence[int]) -> None:
    """Point the output descriptors ``fds`` of a gone terminal at /dev/null."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in fds:
            os.dup2(null, fd)
    finally:
        os.close(null)
    log.info("the terminal is gone; its output goes to /dev/null")
