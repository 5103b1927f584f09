"""The user's check command (their tests, say), run in one attempt's worktree.

It is the user's own command: it runs as their shell would run it there (``$SHELL -c``,
``/bin/sh`` without one), with their environment less the app's own settings
(``POLYPILOT_*``: a key the app was given is not the check's to read), no input, in a process
group of its own that a timeout kills whole. Its output is read as it comes and only the last
:data:`~polypilot_tui.domain.fan_out.CHECK_OUTPUT_BYTES` are kept, saying how much was left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping

from polypilot_tui.domain.fan_out import CHECK_OUTPUT_BYTES, CheckResult
from polypilot_tui.domain.text import strip_control

KILL_GRACE = 2.0
"""Seconds between SIGTERM to the check's process group and SIGKILL."""


def check_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The user's environment without the app's own settings."""
    env = os.environ if environ is None else environ
    return {key: value for key, value in env.items() if not key.startswith("POLYPILOT_")}


def shell(environ: Mapping[str, str]) -> str:
    """The user's shell (an absolute ``$SHELL`` that exists), else ``/bin/sh``."""
    given = environ.get("SHELL", "")
    return given if os.path.isabs(given) and os.access(given, os.X_OK) else "/bin/sh"


async def run_check(
    command: str,
    folder: str,
    timeout: float,
    *,
    limit: int = CHECK_OUTPUT_BYTES,
    environ: Mapping[str, str] | None = None,
) -> CheckResult:
    """Run ``command`` in ``folder``; how it went. Never raises for the command's own failure."""
    env = check_environment(environ)
    began = time.monotonic()
    try:
        process = await asyncio.create_subprocess_exec(
            shell(env),
            "-c",
            command,
            cwd=folder,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its children are killed with it
        )
    except OSError as exc:
        return CheckResult(None, "", 0.0, error=f"the check could not start in {folder}: {exc.strerror or exc}")
    kept = bytearray()
    dropped = 0

    async def read() -> None:
        nonlocal dropped
        assert process.stdout is not None
        while chunk := await process.stdout.read(65536):
            kept.extend(chunk)
            if len(kept) > limit:
                dropped += len(kept) - limit
                del kept[: len(kept) - limit]

    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await read()
            await process.wait()
    except TimeoutError:
        timed_out = True
        await _kill_group(process)
    finally:
        if process.returncode is None:  # cancelled: the check goes with it
            await _kill_group(process)
    text = strip_control(kept.decode("utf-8", "replace"))
    if dropped:
        text = f"[{dropped:,} bytes of earlier output left out]\n" + text
    return CheckResult(
        None if timed_out else process.returncode,
        text,
        round(time.monotonic() - began, 3),
        truncated=bool(dropped),
        timed_out=timed_out,
        error=f"the check did not end within {timeout:g} s and was killed" if timed_out else "",
    )


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGTERM its process group, SIGKILL after the grace."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), wait)
            return
        except TimeoutError:
            continue
