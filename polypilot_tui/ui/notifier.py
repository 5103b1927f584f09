"""Desktop notifications while the dashboard's terminal is not focused.

Whether a ping is due is :mod:`~polypilot_tui.ui.attention`'s decision alone; this module
only delivers one, by the ``notifications`` setting:

* ``auto``: the system notifier (``notify-send`` on Linux, ``osascript`` on macOS) when it is
  on PATH and the dashboard is not running over SSH (it would pop up on the far machine),
  otherwise a terminal escape (which travels over SSH to the terminal the user sees). One
  or the other, never both: a terminal that shows escapes would show every ping twice;
* ``terminal``: the escape only; ``system``: the notifier only; ``off``: nothing.

The notifier runs without a shell (untrusted text is an argument after ``--``, never parsed
as an option or as a script), with a timeout, on the event loop (never blocking the UI);
a failure is logged, never raised.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from typing import Protocol

from polypilot_tui.infra.notify_escapes import BODY_CHARS, TITLE_CHARS, notification_text, terminal_escape

log = logging.getLogger(__name__)

APP_NAME = "polypilot"
COMMAND_TIMEOUT = 5.0
"""Seconds a notifier command may take before it is killed (a hung D-Bus must not pile up)."""
STDERR_CHARS = 300
"""How much of a failed notifier's stderr the log keeps."""

Command = Callable[[str, str], list[str]]
"""Builds the notifier's argv from a (clean) title and body."""


class Notifier(Protocol):
    """Delivers one desktop notification; never raises."""

    async def notify(self, title: str, body: str) -> None:
        """Show ``title`` and ``body`` (untrusted text) outside the terminal."""


def system_command(path: str | None, platform: str = sys.platform) -> Command | None:
    """The system notifier found on ``path`` (a PATH value) for ``platform``, or None."""
    if platform == "darwin":
        osascript = shutil.which("osascript", path=path)
        if osascript is None:
            return None
        # The text is passed as arguments to the script's run handler, never pasted into it;
        # the fixed first argument ends osascript's own options before any untrusted one.
        script = ["-e", "on run argv", "-e", "display notification (item 3 of argv) with title (item 2 of argv)"]
        return lambda title, body: [osascript, *script, "-e", "end run", APP_NAME, title, body]
    notify_send = shutil.which("notify-send", path=path)
    if notify_send is None:
        return None
    return lambda title, body: [notify_send, f"--app-name={APP_NAME}", "--", title, body]


async def run_command(argv: list[str], timeout: float = COMMAND_TIMEOUT) -> bool:
    """Run a notifier command without a shell; True when it exited 0 in time. Logs why not."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
    except OSError as exc:
        log.warning("desktop notification: %s could not start: %s", argv[0], exc)
        return False
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        log.warning("desktop notification: %s took over %.0f s and was killed", argv[0], timeout)
        return False
    if proc.returncode != 0:
        said = notification_text(err.decode("utf-8", "replace"), STDERR_CHARS)
        log.warning("desktop notification: %s exited %s: %s", argv[0], proc.returncode, said)
        return False
    return True


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
            except Exception:  # noqa: BLE001 - a lost notification is no reason to break the UI
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
