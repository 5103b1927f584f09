"""A file rewritten whole from a snapshot (the teams, the fan-out groups): off the loop, the
changes made during a write in one more write, a failing disk told and retried with a backoff
on the engine's clock, and the first success after it said."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.engine.debounced import MIN_RETRY_DELAY, SnapshotWriter
from polypilot_tui.storage.notices import Notice, NoticeBoard
from tests.support.waiting import until


class Disk:
    """A file's writes, made in a thread; a write may be held or fail."""

    def __init__(self) -> None:
        self.written: list[int] = []
        self.threads: set[str] = set()
        self.failing = False
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        """A write began."""

    def write(self, data: int) -> None:
        self.threads.add(threading.current_thread().name)
        self.entered.set()
        self.gate.wait(5)
        if self.failing:
            raise OSError(28, "No space left on device")
        self.written.append(data)


async def test_changes_during_a_write_are_one_more_write_made_off_the_loop() -> None:
    clock, disk, board = FakeClock(), Disk(), NoticeBoard()
    state = {"n": 0}
    writer = SnapshotWriter(clock, lambda: state["n"], disk.write, board, "k", "The things", Path("/x/things"))
    disk.gate.clear()
    state["n"] = 1
    writer.changed()
    await until(lambda: disk.entered.is_set(), 5, "the first write in flight, held")
    for n in (2, 3, 4):
        state["n"] = n
        writer.changed()
    disk.gate.set()
    await writer.flush()
    assert disk.written == [1, 4]
    assert threading.main_thread().name not in disk.threads


@pytest.mark.expect_errors("could not be saved to /x/things")
async def test_a_failing_disk_is_told_retried_with_a_backoff_and_its_end_said() -> None:
    clock, disk, board = FakeClock(), Disk(), NoticeBoard()
    told: list[Notice] = []
    board.listen(told.append)
    writer = SnapshotWriter(clock, lambda: 7, disk.write, board, "k", "The things", Path("/x/things"))
    disk.failing = True
    writer.changed()
    await until(lambda: told, 5, "the failure told")
    assert [n.message for n in told] == [
        "The things could not be saved to /x/things: [Errno 28] No space left on device"
    ]
    deadline = clock.next_deadline()
    assert deadline is not None and deadline - clock.now() >= MIN_RETRY_DELAY  # never a tight loop
    disk.failing = False
    await clock.advance(deadline - clock.now())
    await until(lambda: len(told) == 2, 5, "the retry's success told")
    assert disk.written == [7]
    assert told[-1].message == "The things are saved to /x/things again." and len(told) == 2
    writer.stop()
    writer.changed()
    await writer.flush()  # a stopped writer starts no write, now or later
    assert disk.written == [7] and clock.next_deadline() is None
