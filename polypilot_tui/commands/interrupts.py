"""ctrl+c and SIGTERM in a command: handed to the command's own handler while it runs."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def on_interrupt(handler: Callable[[str], None]) -> Iterator[None]:
    """Inside, SIGINT and SIGTERM call ``handler`` with the signal's name (where the running
    loop can take signal handlers: the main thread of a Unix process); outside, they do not."""
    loop = asyncio.get_running_loop()
    for signum in SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, handler, signal.Signals(signum).name)
    try:
        yield
    finally:
        for signum in SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signum)
