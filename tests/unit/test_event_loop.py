"""Our loops end even when a task was cancelled while starting a process and left behind
(infra/event_loop.py): ``asyncio.run`` (3.11) cancels every task left at its end at once, and
such a task's pipes' task, cancelled with it, never reports the process's end. The cases run in
a process of their own: a hang fails the test by its timeout instead of hanging the suite."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

from polypilot_tui.infra import event_loop

ROOT = Path(__file__).resolve().parents[2]

LEFT_BEHIND = """
import asyncio, sys
from polypilot_tui.infra import event_loop

async def main(steps: int) -> None:
    async def start() -> None:  # as a notifier or a git call starts its process
        proc = await asyncio.create_subprocess_exec(
            "true", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        await proc.communicate()

    async def owner() -> None:  # cancels what it started, and does not wait for it
        started = asyncio.ensure_future(start())
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            started.cancel()
            raise

    task = asyncio.get_running_loop().create_task(owner())
    for _ in range(steps):
        await asyncio.sleep(0)
    task.cancel()  # wherever its process's start stands; the loop ends right after

for steps in range(int(sys.argv[1])):
    event_loop.run(main(steps))
print("every loop ended")
"""


def test_a_task_cancelled_while_starting_a_process_and_left_behind_never_hangs_the_loops_end() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LEFT_BEHIND, "24"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "every loop ended"


def test_every_loop_of_ours_is_run_the_one_way() -> None:
    """``asyncio.run`` is called in infra/event_loop.py alone: a loop run another way skips
    the settling of what was left cancelled."""
    others = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "polypilot_tui").rglob("*.py"))
        if path.name != "event_loop.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\basyncio\.run\(", line)
    ]
    assert others == []


async def test_cancel_and_wait_leaves_a_task_already_cancelled_to_finish_its_clean_up() -> None:
    """A count cancelled when its session closed, then again when the engine closes: the second
    cancel would cut short the first's clean-up (a git killed, not yet reaped)."""
    cleaned: list[str] = []

    async def work() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # as a git killed is reaped
            cleaned.append("reaped")
            raise

    task = asyncio.ensure_future(work())
    await asyncio.sleep(0)
    task.cancel()  # the session closed
    await asyncio.sleep(0.01)  # its clean-up has begun
    await event_loop.cancel_and_wait([task])  # the engine closes
    assert task.cancelled() and cleaned == ["reaped"]
    running = asyncio.ensure_future(work())
    await asyncio.sleep(0)
    await event_loop.cancel_and_wait([running])  # one not yet cancelled is
    assert running.cancelled() and cleaned == ["reaped", "reaped"]


WATCHED = """
import asyncio, warnings
from polypilot_tui.infra import event_loop

async def main() -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec("sh", "-c", "exit 3", stdout=asyncio.subprocess.PIPE)
    await proc.communicate()
    return proc.returncode, type(asyncio.get_child_watcher()).__name__

warnings.simplefilter("error")
print(*event_loop.run(main()))
"""


def test_our_loops_see_a_process_end_through_its_pidfd() -> None:
    """Not through 3.11's thread per process in ``waitpid``, slow to wake on a busy machine."""
    done = subprocess.run([sys.executable, "-c", WATCHED], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "PidfdChildWatcher"]
