"""How a dashboard reaches this machine's engine at start (ui/launch.py ``local_connect``): one
that listens is taken at once, its stream's snapshot the proof that it answers; a socket left by
a dead engine is none, and one is started; an engine that takes the connection but says nothing
is told as such, and its snapshot is still taken when it comes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.config import Settings
from polypilot_tui.engine.verbs import ENGINE_INFO, NoArgs
from polypilot_tui.service import remote
from polypilot_tui.service.address import socket_path
from polypilot_tui.service.client import EngineClient
from polypilot_tui.ui import launch
from tests.support.engine_service import attached_dashboard, kill_engine_of, running_engine, short_state_dir
from tests.ui.helpers import notifications, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def recorded(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Each call of ``ensure_engine`` (the look that asks the engine, or starts one) the
    dashboard's connect makes, by its keywords."""
    calls: list[dict[str, Any]] = []
    real: Callable[..., Awaitable[tuple[Path, bool]]] = launch.ensure_engine

    async def ensure(settings: Settings, **options: Any) -> tuple[Path, bool]:
        calls.append(options)
        return await real(settings, **options)

    monkeypatch.setattr(launch, "ensure_engine", ensure)
    return calls


async def test_a_listening_engine_is_taken_without_a_question_and_a_reconnect_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with running_engine() as engine:
        asked = recorded(monkeypatch)
        connect = launch.local_connect(Settings.read(None, state_dir=engine.state), None)
        assert await connect() == engine.socket and asked == []
        assert await connect() == engine.socket and len(asked) == 1  # a reconnect looks afresh


async def test_a_socket_a_killed_engine_left_is_no_engine_and_one_is_started(monkeypatch: pytest.MonkeyPatch) -> None:
    state = short_state_dir()
    try:
        async with running_engine(state, keep=True) as engine:
            old = engine.process.pid
            os.kill(old, signal.SIGKILL)
            engine.process.wait(10)
        assert socket_path(state).exists()  # left behind: nothing listens on it
        asked = recorded(monkeypatch)
        connect = launch.local_connect(Settings.read(None, state_dir=state), None)
        path = await connect()
        assert len(asked) == 1  # the look found nothing listening: the engine was started
        client = EngineClient(path, timeout=10.0)
        try:
            info = await client.call(ENGINE_INFO, NoArgs())
        finally:
            await client.aclose()
        assert info.pid not in (0, old)
    finally:
        kill_engine_of(state)
        shutil.rmtree(state, ignore_errors=True)


async def test_an_engine_that_says_nothing_at_start_is_told_and_its_late_snapshot_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POLYPILOT_RECORD", "false")
    monkeypatch.setattr(remote, "SNAPSHOT_TIMEOUT", 1.0)
    async with running_engine() as engine:
        os.kill(engine.process.pid, signal.SIGSTOP)  # it still takes connections: the kernel queues them
        # Woken 3 s into the dashboard's start: the start has given up on the snapshot by then.
        woken = asyncio.get_running_loop().call_later(3.0, os.kill, engine.process.pid, signal.SIGCONT)
        try:
            app = attached_dashboard(engine.state)
            async with app.run_test(size=(120, 36), notifications=True) as pilot:
                await wait_for(pilot, lambda: app.selected is not None, timeout=30, what="the snapshot taken late")
                said = "The engine did not start: the engine sent no snapshot within 1 s (hung, or overloaded?)"
                assert any(said in n for n in notifications(app)), notifications(app)
                assert app.engine.reading()
        finally:
            woken.cancel()
            with contextlib.suppress(ProcessLookupError):
                os.kill(engine.process.pid, signal.SIGCONT)
