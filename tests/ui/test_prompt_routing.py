"""Every prompt reaches exactly the session it was typed into, whole — under load.

Thirty sessions stream replies while keys arrive in bursts, with no pause between them: a
few ctrl+down / ctrl+up to pick a session, a multi-line prompt, Enter, and at once the next
switch. The session a prompt belongs to is worked out from the keys alone (what the user
meant), then compared with what each session received: history rows, queue, and what its
agent was finally sent. Before the editor was bound at the keystroke, keys typed right after
ctrl+down went into the previous session's draft, and an Enter racing a redraw sent a prompt
to the next session.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from textual import events

from polypilot_tui.agents.base import ConnectResult, NullBackend
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.ui.helpers import keys_at_once, on_engine, wait_for

SESSIONS = 30
ROUNDS = 40


class StreamingAgent(NullBackend):
    """Streams a reply for every prompt (a delta every 10 ms): the first one until ``warm_up``
    is set, the others for ``seconds``; then idles."""

    def __init__(self, sink: Any, seconds: float, warm_up: asyncio.Event) -> None:
        super().__init__(sink)
        self.seconds = seconds
        self.warm_up = warm_up
        self.prompts: list[str] = []
        self._task: asyncio.Task[None] | None = None

    async def connect(self, resume_id: str | None) -> ConnectResult:
        return ConnectResult(resume_id or "agent", "new session")

    async def send(self, prompt: str) -> None:
        self.prompts.append(prompt)
        self._task = asyncio.get_running_loop().create_task(self._stream())

    async def _stream(self) -> None:
        self.sink(AgentEvent(EventType.TURN_START, {}))
        loop = asyncio.get_running_loop()
        first, end = len(self.prompts) == 1, loop.time() + self.seconds
        n = 0
        while not self.warm_up.is_set() if first else loop.time() < end:
            self.sink(AgentEvent(EventType.MESSAGE_DELTA, {"messageId": "m", "deltaContent": f"w{n} "}))
            n += 1
            await asyncio.sleep(0.01)
        self.sink(AgentEvent(EventType.TURN_END, {}))
        self.sink(AgentEvent(EventType.SESSION_IDLE, {}))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


def keys_for(text: str) -> list[events.Key]:
    """Key events as a terminal delivers them (a new line is ctrl+j in the editor)."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append(events.Key("ctrl+j", None))
        elif ch == " ":
            out.append(events.Key("space", " "))
        else:
            out.append(events.Key(ch, ch))
    return out


async def test_prompts_typed_in_bursts_reach_exactly_their_sessions_whole(tmp_path: Path) -> None:
    agents: dict[str, StreamingAgent] = {}
    # Every session streams its warm-up until every key is typed (a condition: a warm-up of a
    # few seconds ended too soon on a loaded machine), then its queue drains.
    warm_up = asyncio.Event()

    def factory(agent: str, sink: Any, workdir: Path) -> StreamingAgent:
        agents[workdir.name] = StreamingAgent(sink, seconds=0.3, warm_up=warm_up)
        return agents[workdir.name]

    ids = iter(f"s{i:02d}" for i in range(1, 100))
    settings = Settings.read(None, state_dir=tmp_path, record=False)
    catalog = load_agents(None)
    manager = SessionManager(settings, catalog, SystemClock(), backend_factory=factory, id_factory=lambda: next(ids))
    app = on_engine(
        settings,
        catalog,
        LocalEngine(manager),
        theme_dirs=[BUNDLED_DIR],
        keymap_file=tmp_path / "none.toml",
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s01")
        for _ in range(SESSIONS - 1):
            manager.add_session("demo")
        order = manager.ids()
        await wait_for(
            pilot,
            lambda: len(agents) == SESSIONS and all(manager.session(s).connected for s in order),
            what="every session connected",
        )
        for sid in order:  # every session busy streaming while the user types
            await manager.send(sid, f"warm-up {sid}")
        await wait_for(pilot, lambda: all(manager.view(s).status.busy for s in order))

        rng = random.Random(7)
        expected: dict[str, list[str]] = {sid: [f"warm-up {sid}"] for sid in order}
        position = 0  # the selection as the user counts it
        burst: list[events.Key] = []
        for round_ in range(ROUNDS):
            step = rng.choice([-2, -1, 1, 1, 2, 3])
            burst += [events.Key("ctrl+down" if step > 0 else "ctrl+up", None)] * abs(step)
            position = (position + step) % SESSIONS
            target = order[position]
            prompt = f"prompt {round_} for {target}\nsecond line {round_}"
            expected[target].append(prompt)
            burst += keys_for(prompt) + [events.Key("enter", None)]
        keys_at_once(app, *burst)  # all at once: keys arrive faster than the app redraws

        def typed_everything() -> bool:
            got = {
                sid: [i.text for i in manager.history(sid) if i.kind is ItemKind.USER]
                + [p.text for p in manager.session(sid).queue]
                for sid in order
            }
            return sum(map(len, got.values())) == sum(map(len, expected.values()))

        await wait_for(pilot, typed_everything, timeout=60, what="every prompt submitted")
        for sid in order:
            got = [i.text for i in manager.history(sid) if i.kind is ItemKind.USER] + [
                p.text for p in manager.session(sid).queue
            ]
            assert got == expected[sid], f"{sid}: typed {expected[sid]!r}, got {got!r}"
        assert app.pane.editor.text == ""  # nothing left behind in a draft
        assert app.selected == order[position]
        warm_up.set()
        # ... and each agent is finally sent exactly its own prompts, in order.
        await wait_for(
            pilot,
            lambda: all(agents[s].prompts == expected[s] for s in order),
            timeout=120,
            what="every queued prompt sent to its own agent",
        )
