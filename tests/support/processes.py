"""The machine's processes as a test sees them from outside any sandbox: by their argv."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path


def processes(matches: Callable[[list[bytes], str], bool]) -> list[int]:
    """The pids whose argv (and pid, as text) ``matches`` (a process that ends meanwhile is skipped)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if matches(argv, name):
                found.append(int(name))
    return found


def sleeping(marker: str) -> list[int]:
    """Processes running ``sleep <marker>``."""
    return processes(lambda argv, _pid: argv[:2] == [b"sleep", marker.encode()])


def bwrapped(folder: Path) -> list[int]:
    """bwrap processes whose argv names ``folder`` (the sandbox of a session there)."""
    return processes(lambda argv, _pid: argv[0].endswith(b"bwrap") and os.fsencode(folder) in argv)


def running(script: Path, cwd: Path) -> list[int]:
    """Processes whose argv names ``script``, working in ``cwd`` (this test's, not another's)."""

    def matches(argv: list[bytes], pid: str) -> bool:
        return os.fsencode(script) in argv and os.path.realpath(f"/proc/{pid}/cwd") == str(cwd)

    return processes(matches)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


async def communicated(process: asyncio.subprocess.Process, timeout: float) -> tuple[bytes, bytes]:
    """``process.communicate()`` within ``timeout`` seconds (TimeoutError past it); the
    process is killed and reaped on the way out if it still runs, however the wait ends."""
    try:
        return await asyncio.wait_for(process.communicate(), timeout)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
