"""A listening Unix socket whose queue of connections is full: a server too busy (or stuck) to
accept, as an engine whose loop is blocked is to its 2048th waiting client."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def full_queue(path: Path) -> Iterator[socket.socket]:
    """The listener at ``path``, its queue full (one more connect is refused with EAGAIN); the
    connections waiting in it are closed, and the listener, when the block ends."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    waiting: list[socket.socket] = []
    try:
        listener.bind(str(path))
        listener.listen(0)  # Linux keeps one connection waiting
        for _ in range(8):
            one = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            one.setblocking(False)
            try:
                one.connect(str(path))
            except BlockingIOError:
                one.close()
                break
            waiting.append(one)
        else:
            raise AssertionError(f"{path}: the queue never filled")
        yield listener
    finally:
        for one in waiting:
            one.close()
        listener.close()
