"""An engine nobody can reach any more stops (service/serve.py).

Found by hand: engines whose state folder had been deleted lived on, idle and unreachable
(about twenty of them after a day of trials); a dashboard started for that folder then ran a
second engine beside the first. The engine runs here in this process, with its socket looked
at every 50 ms instead of every 30 s.
"""

from __future__ import annotations

import asyncio
import shutil
import socket

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.service.address import socket_path
from polypilot_tui.service.serve import serve
from tests.support.engine_service import short_state_dir

LOOK = 0.05


async def started(state_dir: object) -> asyncio.Task[int]:
    settings = Settings.read(None, state_dir=state_dir, record=False)
    ready = asyncio.Event()
    task = asyncio.create_task(serve(settings, load_agents(None), ready, socket_check=LOOK))
    await asyncio.wait_for(ready.wait(), 30)
    return task


@pytest.mark.expect_errors(
    "session list cannot be saved .*: No such file or directory",
    "could not be saved .*they were kept in",
    "teams could not be saved .*No such file or directory",
)
async def test_an_engine_whose_state_folder_is_deleted_stops() -> None:
    state = short_state_dir()
    task = await started(state)
    shutil.rmtree(state)
    assert await asyncio.wait_for(task, 20) == 0  # a hang guard: it stops within a few looks


async def test_an_engine_whose_socket_another_engine_took_stops_and_leaves_that_socket() -> None:
    state = short_state_dir()
    try:
        task = await started(state)
        path = socket_path(state)
        path.unlink()
        other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # what a new engine binds there
        other.bind(str(path))
        try:
            assert await asyncio.wait_for(task, 20) == 0
            assert path.exists(), "the stopping engine removed the new engine's socket"
        finally:
            other.close()
    finally:
        shutil.rmtree(state, ignore_errors=True)
