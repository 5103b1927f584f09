"""Running the system's desktop notifier (``notify-send`` on Linux, ``osascript`` on macOS).

Without a shell: untrusted text is an argument after ``--`` (or after a fixed first argument
of osascript's), never parsed as an option or as a script; with a timeout, after which the
command is killed (a hung D-Bus must not pile up); a failure is logged, never raised.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
from collections.abc import Callable

from polypilot_tui.domain.exit_status import exit_text
from polypilot_tui.infra.notify_escapes import notification_text

log = logging.getLogger(__name__)

APP_NAME = "polypilot"
COMMAND_TIMEOUT = 5.0
"""Seconds a notifier command may take before it is killed (a hung D-Bus must not pile up)."""
STDERR_CHARS = 300
"""How much of a failed notifier's stderr the log keeps."""

Command = Callable[[str, str], list[str]]
"""Builds the notifier's argv from a (clean) title and body."""


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
        log.warning("desktop notification: %s ended (%s): %s", argv[0], exit_text(proc.returncode), said)
        return False
    return True
