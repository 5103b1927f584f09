"""Whether the Copilot CLI is in a turn, as a flag a coroutine can wait on.

Set by a send and by the CLI's own turn events, cleared by ``session.idle`` and by the
loss of the CLI. Abort and the next send wait on it: the CLI answers an abort at once but
ends the turn (``session.idle {aborted}``) a little later.
"""

from __future__ import annotations

import asyncio


class BusyFlag:
    """The CLI is in a turn: a prompt went out and its ``session.idle`` has not come."""

    def __init__(self) -> None:
        self._busy = False
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def busy(self) -> bool:
        """True from a send (or a turn the CLI started) until its ``session.idle``."""
        return self._busy

    def set(self, busy: bool) -> None:
        """Mark the CLI in a turn (True) or out of it (False), waking whoever waits."""
        self._busy = busy
        (self._idle.clear if busy else self._idle.set)()

    async def wait_idle(self, seconds: float) -> bool:
        """Wait until the CLI is out of its turn (or gone); False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), seconds)
        except TimeoutError:
            return False
        return True
