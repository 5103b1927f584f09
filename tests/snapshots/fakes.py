"""A replay-style fake backend and an app factory on virtual time, for snapshots and UI tests.

Nothing here has timing of its own: tests put sessions into a state by feeding events with
``manager.apply(session_id, AgentEvent(...))`` and move time with ``FakeClock.advance``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from polypilot_tui.agents.base import ConnectResult, Diagnostics, EventSink
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.fan_out import Attempt, CheckResult, Comparison
from polypilot_tui.domain.probes import Probes
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.usage import Usage
from polypilot_tui.domain.workspace import FolderInfo, WorktreeState
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.connector import BackendFactory
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.ui.helpers import caught_up_with, engine_of, on_engine

DENIAL = "Permission denied and could not request permission from user"

AGENT_MODES = {"demo": "", "hangs": "hang", "flaky": "hang-on-resume", "lost": "lost-turn"}
"""Agent name -> how its fake backend behaves when connecting."""


class FakeBackend:
    """Accepts everything, says nothing: events come from the test."""

    kind = "fake"

    def __init__(self, sink: EventSink, mode: str = "") -> None:
        self.sink = sink
        self.mode = mode
        self.sent: list[str] = []
        self.answers: list[tuple[str, str]] = []

    async def connect(self, resume_id: str | None) -> ConnectResult:
        if self.mode == "hang" or (self.mode == "hang-on-resume" and resume_id):
            await asyncio.get_running_loop().create_future()  # never connects
        if self.mode == "lost-turn" and resume_id:
            return ConnectResult(resume_id, "resumed", resumed=True, lost_turn=True)
        return ConnectResult(
            resume_id or "agent-session", "resumed" if resume_id else "new session", resumed=bool(resume_id)
        )

    async def send(self, prompt: str) -> None:
        self.sent.append(prompt)

    async def abort(self) -> None:
        return None

    async def kill(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def answer_permission(self, request_id: str, option_id: str) -> None:
        self.answers.append((request_id, option_id))

    def probe(self) -> Probes | None:
        return None

    def diagnostics(self) -> Diagnostics:
        return Diagnostics(
            "fake-agent --acp",
            (("Agent stderr", "/state/sessions/s1/agent-stderr.log"),),
            ("fake agent: listening", "fake agent: model server refused the connection"),
        )


LAUNCH_FOLDER = "/home/dev/notes"
"""The folder the snapshot app pretends it was started in (never the real cwd)."""
FOLDERS = {
    LAUNCH_FOLDER: FolderInfo(LAUNCH_FOLDER),
    "/home/dev/polypilot": FolderInfo(
        "/home/dev/polypilot", "/home/dev/polypilot", "main", "3f2c1a9d0b7e4c55a1d2e3f4a5b6c7d8e9f0a1b2", dirty=True
    ),
}


_TREES = "/home/dev/.local/state/polypilot/worktrees/shop-1a2b3c4d"
COMPARED = Comparison(
    "g-7f3a",
    "Make the login page remember the user's last tab and add a test for it",
    "pytest -q tests/test_login.py",
    (
        Attempt(
            "s2",
            "copilot-1",
            "copilot",
            "idle",
            "completed",
            312.0,
            Usage(input_tokens=48_200, output_tokens=3_900, cached_tokens=21_000, reported=True),
            ChangeStats(3, 42, 3),
            CheckResult(0, "....\n4 passed in 0.41s\n", 1.6),
            branch="polypilot/fan-7f3a-1",
            folder=f"{_TREES}/fan-7f3a-1",
        ),
        Attempt(
            "s3",
            "copilot-2",
            "copilot",
            "idle",
            "completed",
            287.0,
            Usage(input_tokens=39_800, output_tokens=2_100, reported=True),
            ChangeStats(2, 18, 0),
            CheckResult(
                1,
                "..F.\nFAILED tests/test_login.py::test_last_tab_is_kept - KeyError: 'tab'\n"
                "1 failed, 3 passed in 0.38s\n",
                1.4,
            ),
            branch="polypilot/fan-7f3a-2",
            folder=f"{_TREES}/fan-7f3a-2",
        ),
        Attempt(
            "s4",
            "opencode-1",
            "opencode",
            "working",
            "",
            401.0,
            Usage(
                input_tokens=12_000,
                output_tokens=800,
                context_used=30_000,
                context_size=200_000,
                cost=0.07,
                currency="USD",
                reported=True,
            ),
            ChangeStats(1, 5, 1),
            None,
            branch="polypilot/fan-7f3a-3",
            folder=f"{_TREES}/fan-7f3a-3",
        ),
    ),
    base="main",
    repo="/home/dev/shop",
)
"""A fan-out of three attempts: one passed its check, one failed it, one still works."""


class FixedEngine(LocalEngine):
    """The engine with fixed answers for the dialogs: folders from :data:`FOLDERS` instead of
    the disk, every new session's request fine; for Finish two files uncommitted, one commit
    not pushed, no GitHub CLI where the sessions run; the fan-out :data:`COMPARED`."""

    async def inspect_folder(self, request: verbs.FolderRef) -> FolderInfo:
        if request.path not in FOLDERS:
            raise EngineError(f"the folder {request.path} does not exist")
        return FOLDERS[request.path]

    async def check_new_session(self, request: verbs.NewSession) -> None:
        return None

    async def list_folders(self, request: verbs.FolderQuery) -> verbs.FolderListing:
        return verbs.FolderListing(request.path, ())

    async def finish_state(self, request: verbs.SessionRef) -> verbs.FinishState:
        return verbs.FinishState(
            WorktreeState(uncommitted=2, ahead=1, unpushed=1),
            "needs the GitHub CLI (gh), which is not installed where the sessions run",
        )

    async def compare(self, request: verbs.GroupRef) -> Comparison:
        if request.group != COMPARED.group:
            return await super().compare(request)
        return COMPARED

    async def commit_message(self, request: verbs.SessionRef) -> str:
        return "Fix the login redirect\n\n- src/login.py\n- tests/test_login.py"


def build_app(
    tmp_path: Path,
    *,
    theme: str = "polypilot-night",
    clock: FakeClock | None = None,
    theme_dirs: list[Path] | None = None,
    backend_factory: BackendFactory | None = None,
    notes: Sequence[str] = (),
    **overrides: Any,
) -> PolypilotApp:
    """A PolypilotApp on a FakeClock with fixed session ids (s1, s2, …) and fake agents."""
    clock = clock or FakeClock()
    # The heartbeat is Textual's real-time interval: a test runs it when it means to
    # (Driver.advance, the heartbeat), never when the machine's load lets 5 s pass.
    overrides.setdefault("heartbeat_seconds", 3600)
    settings = Settings.read(
        None,
        state_dir=tmp_path,
        theme=theme,
        record=False,
        **overrides,
    )
    catalog = AgentCatalog({name: AgentConfig(name=name, kind="demo") for name in AGENT_MODES})
    ids = itertools.count(1)
    manager = SessionManager(
        settings,
        catalog,
        clock,
        backend_factory=backend_factory or (lambda agent, sink, workdir: FakeBackend(sink, AGENT_MODES[agent])),
        id_factory=lambda: f"s{next(ids)}",
    )
    app = on_engine(
        settings,
        catalog,
        FixedEngine(manager),
        notes=notes,
        theme_dirs=theme_dirs or [BUNDLED_DIR],
        keymap_file=tmp_path / "no-keymap.toml",
    )
    app.dashboard.new_session.launch_folder = LAUNCH_FOLDER
    return app


class Driver:
    """Puts sessions of an app built by :func:`build_app` into states, event by event."""

    def __init__(self, pilot: Pilot[Any]) -> None:
        self.pilot = pilot
        self.app: PolypilotApp = pilot.app  # type: ignore[assignment]
        self.manager = engine_of(self.app).manager
        self.clock: FakeClock = engine_of(self.app).clock  # type: ignore[assignment]
        self._calls = itertools.count(1)

    async def settle(self) -> None:
        """Let background tasks run, redraw, and wait for the screen to be idle."""
        for _ in range(500):  # the agents found, asked at start (the demo's welcome names them)
            if self.app.dashboard.agents_found.offers is not None:
                break
            await self.pilot.pause(0.01)
        await self.clock.settle()
        await caught_up_with(self.pilot)
        await self.app.dashboard.flush()
        await self.pilot.pause()

    async def advance(self, seconds: float) -> None:
        """Move virtual time (firing watchdog timers) and run the heartbeat."""
        await self.clock.advance(seconds)
        await self.app.dashboard.heartbeat()
        await self.settle()

    async def add(self, name: str, agent: str = "demo") -> str:
        sid = self.manager.add_session(agent, name=name)
        await self.clock.settle()
        await caught_up_with(self.pilot)
        await self.app.dashboard.flush()  # the dashboard shows a new session before anything happens to it
        return sid

    async def restored(self, name: str, rows: Callable[[Session], None]) -> str:
        """A session brought back by a restart with the history ``rows`` gives it (its id is
        ``name``): the dashboard is told of it once, and fetches its rows when it shows them."""
        session = Session(name, name, "demo", created_wall=self.clock.wall())
        rows(session)
        self.manager.adopt(session)
        await self.settle()
        return session.id

    def emit(self, sid: str, event_type: str, **data: Any) -> None:
        self.manager.apply(sid, AgentEvent(event_type, data))

    async def send(self, sid: str, prompt: str) -> None:
        await self.manager.send(sid, prompt)
        await self.clock.settle()

    def turn_start(self, sid: str) -> None:
        self.emit(sid, EventType.TURN_START, turnId=f"turn-{next(self._calls)}")

    def say(self, sid: str, text: str, final: bool = True) -> None:
        """A whole reply as deltas plus the final message."""
        mid = f"msg-{next(self._calls)}"
        for i in range(0, len(text), 40):
            self.emit(sid, EventType.MESSAGE_DELTA, messageId=mid, deltaContent=text[i : i + 40])
        self.emit(
            sid,
            EventType.MESSAGE,
            messageId=mid,
            content=text,
            toolRequests=[] if final else [{"toolCallId": "t", "name": "bash"}],
        )

    def stream(self, sid: str, text: str) -> None:
        """Deltas only: the reply is still streaming."""
        self.emit(sid, EventType.MESSAGE_DELTA, messageId=f"msg-{next(self._calls)}", deltaContent=text)

    def tool(
        self, sid: str, name: str, command: str, output: str | None = None, success: bool = True, error: str = ""
    ) -> str:
        """Start a tool; complete it too unless ``output`` is None and ``error`` is empty."""
        call = f"call-{next(self._calls)}"
        self.emit(sid, EventType.TOOL_START, toolCallId=call, toolName=name, arguments={"command": command})
        if output is not None or error:
            result: dict[str, Any] = {"result": {"content": output or ""}} if success else {"error": {"message": error}}
            self.emit(sid, EventType.TOOL_COMPLETE, toolCallId=call, toolName=name, success=success, **result)
        return call

    def idle(self, sid: str) -> None:
        self.emit(sid, EventType.TURN_END)
        self.emit(sid, EventType.SESSION_IDLE)

    def ask_permission(
        self, sid: str, call: str | None, title: str, detail: str = "", options: list[dict[str, str]] | None = None
    ) -> None:
        self.emit(
            sid,
            EventType.PERMISSION_REQUESTED,
            requestId=f"perm-{next(self._calls)}",
            toolCallId=call,
            kind="shell",
            title=title,
            detail=detail,
            options=options
            or [
                {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "allow_always", "name": "Allow always", "kind": "allow_always"},
                {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
            ],
        )

    async def finished_turn(self, sid: str, prompt: str, reply: str) -> None:
        """A whole ordinary turn: prompt, reasoning, reply, idle."""
        await self.send(sid, prompt)
        self.turn_start(sid)
        self.emit(sid, EventType.REASONING_DELTA, reasoningId="r", deltaContent="Short answer wanted.")
        self.say(sid, reply)
        self.idle(sid)


class WedgedBackend(FakeBackend):
    """An agent whose abort never returns (Stop must still leave a usable session)."""

    def __init__(self, sink: EventSink) -> None:
        super().__init__(sink)
        self.killed = False

    async def abort(self) -> None:
        await asyncio.get_running_loop().create_future()

    async def kill(self) -> None:
        self.killed = True
