"""Engine changes reach the screen whichever thread or context delivered the agent's event.

The Copilot SDK reads the CLI on a thread of its own and hands each event to the loop with
``call_soon_threadsafe``: the callback runs on the app's loop but outside the app's context.
Before the fix, a coalesced redraw armed there was a Textual timer that died at once, its
guard stayed set, the heartbeat went through the same guard, and the dashboard froze on the
first event of every Copilot session. These tests deliver events exactly that way.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

from polypilot_tui.agents.base import NullBackend
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.ui.helpers import engine_of, on_engine, wait_for


class ThreadedAgent:
    """NullBackends whose events are delivered from a foreign thread, as the Copilot SDK does."""

    def __init__(self) -> None:
        self.backends: dict[str, NullBackend] = {}

    def factory(self, agent: str, sink: Any, workdir: Path) -> NullBackend:
        backend = self.backends[workdir.name] = NullBackend(sink)
        return backend

    def deliver(self, loop: asyncio.AbstractEventLoop, session_id: str, *events: AgentEvent) -> None:
        """Hand ``events`` to the loop from a new thread (a fresh context, like the SDK's reader)."""
        sink = self.backends[session_id].sink

        def reader() -> None:
            for event in events:
                loop.call_soon_threadsafe(sink, event)

        thread = threading.Thread(target=reader)
        thread.start()
        thread.join()


def threaded_app(tmp_path: Path, agent: ThreadedAgent, **overrides: Any) -> PolypilotApp:
    settings = Settings.read(None, state_dir=tmp_path, record=False, **overrides)
    catalog = load_agents(None)
    clock = SystemClock()
    manager = SessionManager(settings, catalog, clock, backend_factory=agent.factory, id_factory=lambda: "s1")
    return on_engine(
        settings,
        catalog,
        LocalEngine(manager),
        theme_dirs=[BUNDLED_DIR],
        keymap_file=tmp_path / "no-keymap.toml",
    )


def delta(text: str) -> AgentEvent:
    return AgentEvent(EventType.MESSAGE_DELTA, {"messageId": "m1", "deltaContent": text})


async def test_events_from_a_foreign_thread_keep_reaching_the_screen(tmp_path: Path) -> None:
    agent = ThreadedAgent()
    # A heartbeat far away: the redraw path itself must carry every change.
    app = threaded_app(tmp_path, agent, heartbeat_seconds=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status.value == "idle", what="connected")
        await engine_of(app).manager.send("s1", "hello")
        loop = asyncio.get_running_loop()
        agent.deliver(loop, "s1", AgentEvent(EventType.TURN_START, {}), delta("first"))
        await wait_for(pilot, lambda: app.pane.log_for("s1").streaming == "first", what="the first delta drawn")
        # Right after a redraw the next one is throttled (armed as a timer): the case that froze.
        for word in (" second", " third", " fourth"):
            before = app.dashboard.redraws
            agent.deliver(loop, "s1", delta(word))
            await wait_for(
                pilot, lambda before=before: app.dashboard.redraws > before, timeout=5, what="a redraw after the delta"
            )
        await wait_for(
            pilot,
            lambda: app.pane.log_for("s1").streaming == "first second third fourth",
            timeout=5,
            what="every delta on screen",
        )
        agent.deliver(
            loop,
            "s1",
            AgentEvent(EventType.MESSAGE, {"messageId": "m1", "content": "x"}),
            AgentEvent(EventType.TURN_END, {}),
            AgentEvent(EventType.SESSION_IDLE, {}),
        )
        await wait_for(pilot, lambda: "Idle" in str(app.pane.status.render()), timeout=5, what="the turn's end drawn")


def no_redraw_on_its_way(app: PolypilotApp) -> bool:
    """No EngineChanged posted and no coalesced redraw armed on the dashboard."""
    dashboard = app.dashboard
    armed = [t for t in dashboard._timers if t.name == "coalesced redraw" and t._task and not t._task.done()]  # noqa: SLF001
    return not dashboard._redraw_posted and not armed  # noqa: SLF001


async def test_the_heartbeat_repairs_a_lost_redraw(tmp_path: Path) -> None:
    agent = ThreadedAgent()
    app = threaded_app(tmp_path, agent, heartbeat_seconds=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status.value == "idle", what="connected")
        # The connect's own redraw (a message or a coalesced timer) must have run first, or it
        # draws the send below before the heartbeat does.
        await wait_for(pilot, lambda: no_redraw_on_its_way(app), what="the connect drawn")
        # A change whose redraw request is lost (the guard is set, no message is on its way).
        app.dashboard._redraw_posted = True  # noqa: SLF001 - the lost message this guard must survive
        await engine_of(app).manager.send("s1", "hello")
        await pilot.pause()
        assert "Sending" not in str(app.pane.status.render())
        await app.dashboard.heartbeat()
        assert "Sending" in str(app.pane.status.render())
        # ... and redraws requested after the repair are not blocked by the old guard.
        agent.deliver(asyncio.get_running_loop(), "s1", AgentEvent(EventType.TURN_START, {}), delta("hi"))
        await wait_for(pilot, lambda: app.pane.log_for("s1").streaming == "hi", timeout=5, what="the delta drawn")


async def test_printing_inside_the_running_app_does_no_harm(tmp_path: Path, capsys: Any) -> None:
    agent = ThreadedAgent()
    app = threaded_app(tmp_path, agent)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status.value == "idle", what="connected")
        print("to stdout from inside the app")
        print("to stderr from inside the app", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        await engine_of(app).manager.send("s1", "still works")
        await wait_for(pilot, lambda: "Sending" in str(app.pane.status.render()), what="the app still drawing")
        assert app.is_running
