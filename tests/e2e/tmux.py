"""Drive ``polypilot`` in a real terminal: tmux with a private server, keys in, the screen out.

Each :class:`Terminal` owns its own tmux server (``-L`` socket name, no user config), so
tests never see or touch the user's tmux sessions, and the server is killed when the test
ends whatever happened.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from signal import SIGCHLD

import pytest

from tests.support.waiting import until_blocking


def require_tmux() -> str:
    """The tmux binary; skipped without it (failed when ``CI=true``: .ci/run installs it)."""
    found = shutil.which("tmux")
    if found is None:
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail("tmux is not installed (CI=true: the real-terminal test must run)")
        pytest.skip("tmux is not installed")
    return found


class Terminal:
    """One tmux window running a command; :meth:`screen` is what a person would see."""

    def __init__(self, command: Sequence[str], env: dict[str, str], cwd: Path, size: tuple[int, int] = (150, 45)):
        self.tmux = require_tmux()
        self.socket = f"polypilot-test-{uuid.uuid4().hex[:8]}"
        self.env = env  # pytest-xdist workers export COLUMNS=80 LINES=24: the app must not care
        self.cwd = cwd
        self.size = size
        # A config of our own: no user settings, and a fixed window size (with no client
        # attached tmux otherwise sizes windows 80x24, whatever new-session was told).
        self.config = Path(tempfile.mkstemp(prefix="tmux-", suffix=".conf")[1])
        self.config.write_text(f"set -g default-size {size[0]}x{size[1]}\n")
        self.start(command)

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.tmux, "-L", self.socket, "-f", str(self.config), *args],
            capture_output=True,
            text=True,
            check=check,
            env=self.env,
            timeout=30,
        )

    def start(self, command: Sequence[str]) -> None:
        """Run ``command`` in a fresh window (the server starts with the first one)."""
        width, height = self.size
        # The program starts only once its terminal has the window's size (at most 5 s), so
        # a start never races tmux's sizing: a restarted dashboard rarely drew 80 columns in
        # a 150-column pane for good (seen in CI; the cause was not pinned down).
        wait = f'i=0; while [ "$(stty size)" != "{height} {width}" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done'
        line = " ".join(_quote(part) for part in ["sh", "-c", f'{wait}; exec "$@"', "sh", *command])
        self._run(
            "new-session", "-d", "-s", "main", "-x", str(width), "-y", str(height), "-c", str(self.cwd), f"exec {line}"
        )
        self._run("set-option", "-t", "main", "remain-on-exit", "on")
        # tmux 3.3a can report a detached pane at its size while its terminal still has
        # another (a dashboard drew 80 columns in a "150-column" pane, rarely): setting the
        # size twice makes tmux set the terminal's.
        self._run("resize-window", "-t", "main", "-x", str(width - 1), "-y", str(height))
        self._run("resize-window", "-t", "main", "-x", str(width), "-y", str(height))

    def keys(self, *keys: str) -> None:
        """Press keys by tmux name (``Enter``, ``C-x``, ``y``)."""
        self._run("send-keys", "-t", "main", *keys)

    def type(self, text: str) -> None:
        """Type text literally."""
        self._run("send-keys", "-t", "main", "-l", text)

    def screen(self) -> str:
        """The visible pane, as plain text."""
        return self._run("capture-pane", "-p", "-t", "main").stdout

    def dead(self) -> bool:
        """The program in the pane has exited."""
        return self.pane("pane_dead") == "1"

    def pane(self, name: str) -> str:
        """A tmux format variable of the pane (``alternate_on``, ``mouse_any_flag``, ``pane_pid`` …)."""
        return self._run("display-message", "-p", "-t", "main", f"#{{{name}}}", check=False).stdout.strip()

    def exit_status(self, timeout: float = 60.0) -> str:
        """How the program ended, once tmux has collected it: ``"status 143"`` or ``"signal 9"``."""
        self.wait_until_dead(timeout)
        deadline = time.monotonic() + 10  # the pane is dead at the pty's end; the status comes with SIGCHLD
        nudge = time.monotonic() + 1
        while True:
            status, signal = self.pane("pane_dead_status"), self.pane("pane_dead_signal")
            if status or signal:
                return f"status {status}" if status else f"signal {signal}"
            if time.monotonic() > deadline:
                raise AssertionError("tmux never collected the program's exit status")
            if time.monotonic() > nudge:
                # Debian's tmux removes the utmp entry of a closed pane through libutempter,
                # which waits for its helper with SIGCHLD set to default: a SIGCHLD of the
                # program arriving then is lost, and tmux leaves it a zombie. Another SIGCHLD
                # makes tmux reap it; the status is still the one the kernel kept.
                os.kill(int(self._run("display-message", "-p", "#{pid}").stdout), SIGCHLD)
                nudge = time.monotonic() + 1
            time.sleep(0.05)

    def wait_for(self, *needles: str, timeout: float = 90.0) -> str:
        """Wait until every needle is on screen; returns the screen (raises with it shown)."""
        shown: list[str] = [""]

        def on_screen() -> str | None:
            shown[0] = self.screen()
            return shown[0] if all(needle in shown[0] for needle in needles) else None

        return until_blocking(on_screen, timeout, lambda: f"{needles!r} on screen:\n{shown[0]}", every=0.1)

    def wait_until_dead(self, timeout: float = 60.0) -> None:
        until_blocking(self.dead, timeout, lambda: f"the program to exit:\n{self.screen()}", every=0.1)

    def resize(self, width: int, height: int) -> None:
        """Resize the window, as a person dragging the terminal's corner."""
        self._run("resize-window", "-t", "main", "-x", str(width), "-y", str(height))

    def restart(self, command: Sequence[str]) -> None:
        """Run ``command`` again in a fresh window of the same size (after the first one exited).

        A new session rather than ``respawn-pane``: with no client attached, a respawned
        program could start before tmux applied the window's size and draw at 80x24.
        """
        self._run("kill-server", check=False)
        for attempt in range(50):  # the old server may still be going away: its socket refuses a while
            try:
                self.start(command)
                return
            except subprocess.CalledProcessError:
                if attempt == 49:
                    raise
                time.sleep(0.1)

    def close(self) -> None:
        self._run("kill-server", check=False)
        self.config.unlink(missing_ok=True)


def _quote(part: str) -> str:
    import shlex

    return shlex.quote(part)
