"""A command's stdout, whose reader may leave at any time (``polypilot run --json … | head``).

Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError; unhandled, it
printed a traceback, and the interpreter's last flush at exit failed again. Here the first
failed write ends the output quietly: stdout is pointed at ``/dev/null`` (nothing fails on
it again, the last flush included), the owner is told (``run`` then stops its turn), and the
command exits with :data:`EXIT_STDOUT_CLOSED`, as a process the SIGPIPE ended would.

:class:`Output` also knows whether the last line it wrote is still open, so a line of its
own (``[tool bash] …``) starts a new line only when one is needed — never an empty line.

:func:`say` is how a command prints a line: what an engine returned (with ``--host``, another
machine's) reaches the terminal without the terminal controls it may hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections.abc import Callable
from typing import TextIO

from polypilot_tui.domain.text import strip_control

EXIT_OK = 0
EXIT_STDOUT_CLOSED = 141
"""128 + SIGPIPE: what a shell reports for a writer whose reader went away."""


def stdout_to_devnull(stream: TextIO | None = None) -> None:
    """Point ``stream``'s descriptor (stdout) at /dev/null: later writes and flushes succeed."""
    stream = sys.stdout if stream is None else stream
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)


def say(*parts: object, sep: str = " ", err: bool = False, data: bool = False) -> None:
    """Print ``parts`` as ``print`` does (stdout, or stderr with ``err``), stripped of terminal
    controls: every command's line may hold text an engine returned. ``data`` (a diff) is
    written as it is, newline and all, when the stream is not a terminal (a pipe, a file): a
    patch must stay byte for byte; a terminal gets it stripped."""
    stream = sys.stderr if err else sys.stdout
    text = sep.join(str(part) for part in parts)
    if data:
        if _is_terminal(stream):
            text = strip_control(text)
        stream.write(text)
        return
    print(strip_control(text), file=stream)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, AttributeError):
        return False


class Output:
    """Text to stdout that notices when its reader left, and whether its line is open."""

    def __init__(self, stream: TextIO | None = None, on_closed: Callable[[], None] | None = None) -> None:
        self._stream = sys.stdout if stream is None else stream
        self._on_closed = on_closed
        self.closed = False
        """The reader left: nothing more is written."""
        self.line_open = False
        """Something was written since the last newline."""

    def write(self, text: str) -> None:
        if self.closed or not text:
            return
        try:
            self._stream.write(text)
            self._stream.flush()
        except BrokenPipeError:
            self._closed()
            return
        self.line_open = not text.endswith("\n")

    def line(self, text: str) -> None:
        """``text`` on a line of its own (after ending the open line, if there is one)."""
        self.end_line()
        self.write(text + "\n")

    def end_line(self) -> None:
        """End the open line, if there is one."""
        if self.line_open:
            self.write("\n")

    def watch_reader(self, loop: asyncio.AbstractEventLoop) -> None:
        """Notice a pipe's reader leaving while nothing is written (a turn that waits): the
        write end of a pipe reports an error to the loop's poller once its read end is closed."""
        try:
            fd = self._stream.fileno()
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                return
            loop.add_reader(fd, self._reader_gone, loop, fd)
        except (OSError, ValueError, NotImplementedError):
            return  # not a pipe, or a loop that cannot watch it: a write still notices

    def _reader_gone(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        loop.remove_reader(fd)
        if not self.closed:
            self._closed()

    def _closed(self) -> None:
        self.closed = True
        stdout_to_devnull(self._stream)
        if self._on_closed is not None:
            self._on_closed()
