"""The quit on SIGTERM / SIGHUP / SIGINT, piece by piece (the whole app: tests/e2e/test_tmux_signals.py).

The terminals here are real pseudo-terminals; a hung-up one is a pty whose other end closed.
"""

from __future__ import annotations

import errno
import os
import pty
import signal
import threading
from typing import Any

import pytest

from polypilot_tui.ui.quit_signals import QuitOnSignal, exit_code
from polypilot_tui.ui.terminal import QuietOutput, detach, terminal_gone


class FakeApp:
    def __init__(self) -> None:
        self.exits: list[tuple[Any, int]] = []

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None:
        self.exits.append((result, return_code))


def test_the_first_signal_asks_the_app_to_exit_with_128_plus_its_number_and_later_ones_are_ignored() -> None:
    app = FakeApp()
    left: list[int] = []
    handler = QuitOnSignal(app, ttys=[], guard=600, hard_exit=left.append)
    handler(signal.SIGTERM)
    handler(signal.SIGHUP)  # a hangup brings more than one: the quit under way must go on
    handler(signal.SIGTERM)
    assert app.exits == [(143, 143)] and handler.received == signal.SIGTERM and not left
    assert (exit_code(signal.SIGHUP), exit_code(signal.SIGINT)) == (129, 130)


@pytest.mark.expect_errors("the quit on SIGHUP did not end within")
def test_a_quit_that_does_not_end_leaves_anyway_with_the_same_code() -> None:
    left: list[int] = []
    done = threading.Event()

    def hard_exit(code: int) -> None:
        left.append(code)
        done.set()

    QuitOnSignal(FakeApp(), ttys=[], guard=0.05, hard_exit=hard_exit)(signal.SIGHUP)
    assert done.wait(10) and left == [129]


def test_a_live_terminal_is_kept_and_a_hung_up_one_is_detached() -> None:
    master, slave = pty.openpty()
    try:
        app = FakeApp()
        handler = QuitOnSignal(app, ttys=[slave], guard=600, hard_exit=lambda code: None)
        assert not terminal_gone([slave])
        handler(signal.SIGHUP)  # sent by hand: the terminal is still there, to be restored
        assert not handler.detached and os.isatty(slave)

        os.close(master)  # the window closed: the terminal is hung up
        master = -1
        assert terminal_gone([slave])
        try:
            os.write(slave, b"x")
            raise AssertionError("a hung-up terminal took a write")
        except OSError as exc:
            assert exc.errno == errno.EIO
        handler = QuitOnSignal(app, ttys=[slave], guard=600, hard_exit=lambda code: None)
        handler(signal.SIGHUP)
        assert handler.detached and not os.isatty(slave)
        assert os.write(slave, b"the screen restored into nothing") > 0  # /dev/null now
        assert app.exits == [(129, 129), (129, 129)]
    finally:
        os.close(slave)
        if master >= 0:
            os.close(master)


def test_detach_points_each_descriptor_at_dev_null() -> None:
    read, write = os.pipe()
    try:
        detach([write])
        assert os.path.realpath(f"/proc/self/fd/{write}") == os.devnull
    finally:
        os.close(read)
        os.close(write)


class Failing:
    def __init__(self) -> None:
        self.calls = 0

    def write(self, text: str) -> int:
        self.calls += 1
        raise OSError(errno.EIO, "Input/output error")

    def flush(self) -> None:
        self.calls += 1
        raise OSError(errno.EIO, "Input/output error")

    def fileno(self) -> int:
        return 2

    def isatty(self) -> bool:
        return True


def test_the_drivers_output_ends_at_its_first_failure_instead_of_raising() -> None:
    stream = Failing()
    out = QuietOutput(stream)  # type: ignore[arg-type]
    assert out.write("\x1b[?1049l") == len("\x1b[?1049l")  # no exception: the writer thread lives on
    out.flush()
    out.write("more")
    assert stream.calls == 1 and isinstance(out.failed, OSError)
