"""Desktop notifications while the dashboard's terminal is not focused.

Whether a ping is due is :mod:`~polypilot_tui.ui.attention`'s decision alone; this module
only delivers one, by the ``notifications`` setting:

* ``auto``: the system notifier (``notify-send`` on Linux, ``osascript`` on macOS) when it is
  on PATH and the dashboard is not running over SSH (it would pop up on the far machine),
  otherwise a terminal escape (which travels over SSH to the terminal the user sees). One
  or the other, never both: a terminal that shows escapes would show every ping twice;
* ``terminal``: the escape only; ``system``: the notifier only; ``off``: nothing.

The system notifier is run by :mod:`polypilot_tui.infra.notify_command` (no shell, a timeout,
failures logged) on the event loop, never blocking the UI.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import Protocol

from polypilot_tui.infra.notify_command import COMMAND_TIMEOUT, Command, run_command, system_command
from polypilot_tui.infra.notify_escapes import BODY_CHARS, TITLE_CHARS, notification_text, terminal_escape

log = logging.getLogger(__name__)


class Notifier(Protocol):
    """Delivers one desktop notification; never raises."""

    async def notify(self, title: str, body: str) -> None:
        """Show ``title`` and ``body`` (untrusted text) outside the terminal."""


class DesktopNotifier:
    """A terminal escape through ``write``, a system notifier command, or both."""

    def __init__(
        self,
        write: Callable[[str], None] | None,
        command: Command | None,
        env: Mapping[str, str],
        timeout: float = COMMAND_TIMEOUT,
    ) -> None:
        self.write = write
        """Writes to the dashboard's terminal (None: no escapes)."""
        self.command = command
        """The system notifier (None: none)."""
        self._env = env
        self._timeout = timeout

    async def notify(self, title: str, body: str) -> None:
        """Write the escape and run the notifier; failures are logged."""
        title, body = notification_text(title, TITLE_CHARS), notification_text(body, BODY_CHARS)
        if self.write is not None:
            try:
                self.write(terminal_escape(title, body, self._env))
            except (OSError, ValueError):  # a gone or closed terminal: a lost notification breaks nothing
                log.warning("desktop notification: the terminal write failed", exc_info=True)
        if self.command is not None:
            await run_command(self.command(title, body), self._timeout)


def over_ssh(env: Mapping[str, str]) -> bool:
    """The dashboard runs in an SSH session (its desktop, if any, is not the user's)."""
    return bool(env.get("SSH_CONNECTION") or env.get("SSH_TTY"))


def desktop_notifier(
    mode: str,
    write: Callable[[str], None],
    env: Mapping[str, str] | None = None,
    platform: str = sys.platform,
) -> DesktopNotifier | None:
    """The notifier the ``notifications`` setting (``mode``) asks for here (None for ``off``, or nothing usable)."""
    env = os.environ if env is None else env
    if mode == "off":
        return None
    command = None if mode == "terminal" else system_command(env.get("PATH"), platform)
    if mode == "auto" and over_ssh(env):
        command = None
    if mode == "system" and command is None:
        log.warning("notifications=system, but no notify-send/osascript on PATH: no desktop notifications")
        return None
    terminal = mode == "terminal" or (mode == "auto" and command is None)
    return DesktopNotifier(write if terminal else None, command, env)
