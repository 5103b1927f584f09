"""Backends the chaos matrix runs on. A driver says how to build a manager on its backend,
which prompt makes each fault real there, and what the fault must end in.

A driver gives an agent config (``agent_config``), the prompts of the faults it can make
real (``prompts``), the expected outcome and bound of each (``expect``) and a reason for
each fault it cannot (``not_applicable``). Real backends use the app's own backend factory
(``create_backend``), so a real agent CLI on the scripted model server is one call of
:func:`model_server_driver` (see the Copilot line in :mod:`tests.chaos.registry`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import os
import signal
import sys
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from msgspec import structs

from polypilot_tui.agents import create_backend
from polypilot_tui.agents.npm_cache import CODEX_ACP, OPENCODE, NpmAgent
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings, load_agents
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import Clock, FakeClock, SystemClock
from polypilot_tui.domain.session import Session
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.infra.process_tree import descendants
from tests.chaos.rig import BackendWrapper, Rig, scaled
from tests.support.acp_agents import codex_agent, opencode_agent, require_binary
from tests.support.model_server import ModelServer

FAKE_ACP_AGENT = Path(__file__).resolve().parents[1] / "support" / "fake_acp_agent.py"


@dataclass(frozen=True)
class Expect:
    """What a fault turn must end in, and how soon (the driver's seconds)."""

    outcome: str | tuple[str, ...]
    within: float
    at_least: float = 0.0

    def allows(self, outcome: str) -> bool:
        return outcome in ((self.outcome,) if isinstance(self.outcome, str) else self.outcome)


class Driver:
    """One backend under test. Subclasses fill in the class attributes and the config."""

    name: ClassVar[str]
    virtual: ClassVar[bool] = False
    marks: ClassVar[tuple[Any, ...]] = ()
    timeout: ClassVar[float] = 60.0
    """pytest-timeout per scenario (real seconds)."""
    slack: ClassVar[float] = 2.0
    """Extra real seconds a deadline may be missed by on a loaded 2-core CI box. A watchdog
    that really misses a tier misses it by the tier (seconds to minutes), not by this."""
    prompts: ClassVar[Mapping[str, str]] = {}
    expect: ClassVar[Mapping[str, Expect]] = {}
    not_applicable: ClassVar[Mapping[str, str]] = {}
    ok_prompt: ClassVar[str] = "hello there"
    ok_within: ClassVar[float] = 30.0
    """A plain prompt completes within this long."""
    connect_within: ClassVar[float] = 30.0
    permission_policy: ClassVar[str] = "ask"

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.clock: Clock = FakeClock() if self.virtual else SystemClock()
        self.rigs: list[Rig] = []
        self._ids = itertools.count(1)
        self._stack = ExitStack()
        self._orphans: list[int] = []

    # ---- lifetime -----------------------------------------------------------------
    async def start(self) -> None:
        """Start what the backend needs (model server, binaries)."""

    async def close(self) -> None:
        for rig in self.rigs:
            await rig.manager.shutdown()
        for pid in self._orphans:  # children of agents we SIGKILLed (their tools)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self._stack.close()

    # ---- configuration ------------------------------------------------------------
    def agent_config(self) -> AgentConfig:
        raise NotImplementedError

    def settings(self) -> Settings:
        return Settings.read(
            None,
            state_dir=self.tmp_path / "state",
            permission_policy=self.permission_policy,
            record=False,
        )

    def tune(self, manager: SessionManager) -> None:
        """Adjust what Settings cannot (thresholds that scale with the tiers)."""

    def rig(self, wrap: BackendWrapper | None = None) -> Rig:
        """A new manager (sharing this driver's clock, state and agent) with the checks on."""
        settings = self.settings()
        agent = self.agent_config()
        catalog = AgentCatalog({agent.name: agent})
        holder: list[Rig] = []

        def make(name: str, sink: Any, workdir: Path) -> Any:
            return create_backend(catalog.get(name), sink, self.clock, settings, workdir)

        def factory(name: str, sink: Any, workdir: Path) -> Any:
            return holder[0].track(wrap, make)(name, sink, workdir)

        manager = SessionManager(
            settings, catalog, self.clock, backend_factory=factory, id_factory=lambda: f"c{next(self._ids)}"
        )
        self.tune(manager)
        rig = Rig(manager, self.clock, slack=0.0 if self.virtual else self.slack)
        holder.append(rig)
        self.rigs.append(rig)
        return rig

    async def new_session(self, rig: Rig) -> str:
        """A connected session (real seconds bound the connect, whatever the clock)."""
        return await asyncio.wait_for(rig.manager.create_session(self.agent_config().name), self.connect_within)

    # ---- faults -------------------------------------------------------------------
    def prompt(self, scenario: str) -> str:
        return self.prompts[scenario]

    async def kill_agent(self, rig: Rig, sid: str) -> None:
        """SIGKILL the agent process of ``sid`` (real backends)."""
        pid = getattr(rig.backend(sid), "pid", None)
        assert pid, f"{self.name}: no agent process to kill"
        self._orphans += descendants(pid)
        os.kill(pid, signal.SIGKILL)

    async def restart(self, rig: Rig, sid: str) -> tuple[Rig, str]:
        """Quit the app mid-turn and start a new one that adopts the session.

        No persistence layer: the session comes back the way polypilot_tui.engine.persistence gives
        it back (history rows, plus the streamed draft as an interrupted reply).
        """
        old = rig.manager.session(sid)
        prompt = old.turn.prompt if old.turn is not None else None
        draft = old.turn.response_text if old.turn is not None else ""
        await rig.manager.shutdown()
        restored = Session(
            old.id,
            old.name,
            old.agent,
            created_wall=old.created_wall,
            cwd=old.cwd,
            model=old.model,
            agent_session_id=old.agent_session_id,
            history=copy.deepcopy(old.history),
            last_prompt=old.last_prompt,
        )
        if draft.strip():
            restored.add_item(ItemKind.ASSISTANT, draft, self.clock.wall(), interrupted=True)
        new = self.rig()
        new.manager.adopt(restored, mid_turn_prompt=prompt)
        return new, sid


# ---- the demo agent, in virtual time -------------------------------------------------
class DemoDriver(Driver):
    """The scripted in-process agent on a FakeClock, default (PolyPilot) tiers."""

    name = "demo"
    virtual = True
    timeout = 30.0
    prompts = {
        "zero-idle": "!zero-idle",
        "hang-after-final-tool": "!hang-after-final-tool",
        "model-hang": "!hang",
        "dead-send": "!dead-send",
        "usage-flood": "!usage-flood",
        "long-tool": "!long-tool",
        "tool-hang": "!tool-hang",
        "permission-loss": "!permission-loss-mixed",
        "recovery-fails": "!permission-loss",
        "sigkill-mid-tool": "!crash-mid-tool",
        "restart-mid-turn": "!long-tool",
        "stop-during-recovery": "!permission-loss",
        "double-stop": "!slow",
        "reconnect-during-turn": "!slow",
    }
    expect = {
        "zero-idle": Expect("completed", 6.0),
        "hang-after-final-tool": Expect("completed", 40.0),
        "model-hang": Expect("stuck", 121.0, at_least=120.0),
        "dead-send": Expect("aborted", 121.0, at_least=120.0),
        "usage-flood": Expect("stuck", 121.0, at_least=120.0),
        "long-tool": Expect("completed", 600.0, at_least=540.0),
        "tool-hang": Expect("stuck", 661.0, at_least=660.0),
        "permission-loss": Expect("recovered", 10.0),
        "recovery-fails": Expect("failed", 10.0),
        "sigkill-mid-tool": Expect("failed", 3.0),
        "restart-mid-turn": Expect("failed", 1.0),
        "stop-during-recovery": Expect("aborted", 1.0),
        "double-stop": Expect("aborted", 1.0),
        "reconnect-during-turn": Expect("aborted", 1.0),
    }

    def agent_config(self) -> AgentConfig:
        return load_agents(None).get("demo")


# ---- the fake ACP agent: a real process, real time, short tiers ------------------------
#: Real-time tiers: inactivity 3 s and the rest in proportion, bounded and fast.
SHORT_TIERS = {
    "inactivity": 3.0,
    "tool": 7.0,
    "tool_escalation": 1.0,
    "used_tools_idle": 3.0,
    # A restored turn waits this long for its new agent process: its start alone took over 2 s
    # once on a loaded 2-core runner, which read as "stuck" before the connect said "lost".
    "resume_quiescence": 4.0,
    "reconnect": 3.0,
    "max_turn": 60.0,
    "turn_end_fallback": 0.5,
    "turn_end_tool_extra": 1.0,
    "post_completion_idle": 2.0,
    "dead_send": 2.0,
}
#: ... and the thresholds Settings does not expose, scaled the same way.
SHORT_PROBES = {"tool_alive_log_age": 1.0, "used_tools_log_fresh": 2.5, "case_b_freshness": 2.5}

_NOT_ACP = {
    "zero-idle": "ACP has no separate idle event to lose: the prompt response is the one end signal",
}


class RealDriver(Driver):
    """A real agent process on the system clock with short tiers."""

    tiers: ClassVar[Mapping[str, float]] = SHORT_TIERS
    probes: ClassVar[Mapping[str, float]] = SHORT_PROBES
    stop_grace: ClassVar[float] = 1.5

    def settings(self) -> Settings:
        base = super().settings()
        watchdog = structs.replace(base.watchdog, **self.tiers)
        return structs.replace(base, watchdog=watchdog, stop_grace_seconds=self.stop_grace)

    def tune(self, manager: SessionManager) -> None:
        manager.cfg = scaled(manager.cfg, **self.probes)

    def workspace(self) -> Path:
        folder = self.tmp_path / "ws"
        folder.mkdir(exist_ok=True)
        readme = folder / "README.md"
        if not readme.exists():
            readme.write_text("readme text\n")
        return folder


class FakeAcpDriver(RealDriver):
    """tests/support/fake_acp_agent.py through the real AcpBackend (``CHAOS <fault>`` prompts)."""

    name = "fake-acp"
    timeout = 60.0
    prompts = {
        "hang-after-final-tool": "CHAOS hang-after-final-tool",
        "model-hang": "CHAOS hang",
        "dead-send": "CHAOS dead-send",
        "usage-flood": "CHAOS usage-flood",
        "long-tool": "CHAOS long-tool 5",
        "tool-hang": "CHAOS tool-hang",
        "permission-loss": "CHAOS permission-loss",
        "recovery-fails": "CHAOS permission-loss",
        "sigkill-mid-tool": "CHAOS tool-hang",
        "restart-mid-turn": "CHAOS long-tool 2",
        "stop-during-recovery": "CHAOS permission-loss",
        "double-stop": "SLOW",
        "reconnect-during-turn": "SLOW",
    }
    expect = {
        # Tools used, then silence: Case B completes once the agent's stream is stale.
        "hang-after-final-tool": Expect("completed", 8.0, at_least=2.5),
        "model-hang": Expect("stuck", 4.0, at_least=3.0),
        # Stuck at the tier; the abort is ignored, so the agent is killed (next send reconnects).
        "dead-send": Expect("stuck", 4.0, at_least=3.0),
        # A tool runs, then only usage: the tool tier, one escalation, stuck.
        "usage-flood": Expect("stuck", 9.0, at_least=7.0),
        "long-tool": Expect("completed", 7.0, at_least=5.0),
        "tool-hang": Expect("stuck", 9.0, at_least=8.0),
        "permission-loss": Expect("recovered", 10.0),
        "recovery-fails": Expect("failed", 10.0),
        "sigkill-mid-tool": Expect("failed", 2.0),
        # The ACP agent process is new after a restart: the turn died with the old one, and the
        # connect says so (lost turn): it fails at once with a one-key resend, no 30 s wait.
        "restart-mid-turn": Expect("failed", 2.0),
        "stop-during-recovery": Expect("aborted", 3.0),
        "double-stop": Expect("aborted", 3.0),
        "reconnect-during-turn": Expect("aborted", 1.0),
    }
    not_applicable = _NOT_ACP

    def agent_config(self) -> AgentConfig:
        return AgentConfig(
            name="fake-acp",
            kind="acp",
            command=sys.executable,
            args=[str(FAKE_ACP_AGENT)],
            env={"FAKE_ACP_STATE": str(self.tmp_path / "agent-state")},
            cwd=self.workspace(),
        )


# ---- real agents from npm against the scripted model server ----------------------------
#: The scripted model's keywords (tests/support/model_script.py) for the faults it can make.
MODEL_PROMPTS = {
    "hang-after-final-tool": "HANGAFTERTOOL",
    "model-hang": "HANG",
    "long-tool": "TOOL CMD=`sleep 6 && echo built`",
    "tool-hang": "TOOL CMD=`sleep 60`",
    "sigkill-mid-tool": "TOOL CMD=`sleep 60`",
    "restart-mid-turn": "SLOW",
    "double-stop": "SLOW",
    "reconnect-during-turn": "SLOW",
}
MODEL_TIERS = {
    **SHORT_TIERS,
    "inactivity": 5.0,
    "tool": 9.0,
    "used_tools_idle": 4.0,
    "resume_quiescence": 3.0,
    "reconnect": 5.0,
    "max_turn": 90.0,
}
_NO_MODEL_FAULT = {
    "dead-send": "a real agent always takes the prompt; the scripted model cannot make it swallow one",
    "usage-flood": "the scripted model cannot make a real agent report usage without progress",
    "permission-loss": "the scripted model cannot make a real agent lose its permission binding",
    "recovery-fails": "needs a permission-binding loss to start a recovery (see permission-loss)",
    "stop-during-recovery": "needs a permission-binding loss to start a recovery (see permission-loss)",
    "twenty-sessions": "20 real agent processes do not fit the CI budget; run on fake-acp",
}


class ModelServerDriver(RealDriver):
    """A real agent CLI installed from npm, talking to the scripted model server."""

    package: ClassVar[NpmAgent]
    builder: ClassVar[Callable[[Path, ModelServer, Path], AgentConfig]]
    """(binary, server, home) -> AgentConfig, e.g. tests/support/acp_agents.py codex_agent."""
    marks = (pytest.mark.e2e,)
    timeout = 120.0
    tiers = MODEL_TIERS
    prompts = MODEL_PROMPTS
    permission_policy = "allow"  # the tool faults need the shell; policy answers, nobody clicks
    connect_within = 90.0
    ok_within = 60.0
    expect = {
        "hang-after-final-tool": Expect("completed", 12.0, at_least=3.0),
        "model-hang": Expect("stuck", 7.0, at_least=5.0),
        "long-tool": Expect("completed", 20.0, at_least=6.0),
        "tool-hang": Expect("stuck", 12.0, at_least=9.0),
        "sigkill-mid-tool": Expect("failed", 3.0),
        "restart-mid-turn": Expect("failed", 6.0),  # a new agent process: lost at once (see fake-acp)
        "double-stop": Expect("aborted", 5.0),
        "reconnect-during-turn": Expect("aborted", 1.0),
    }
    not_applicable = {**_NOT_ACP, **_NO_MODEL_FAULT}

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.server: ModelServer | None = None
        self._config: AgentConfig | None = None

    async def start(self) -> None:
        binary = require_binary(self.package)
        self.server = self._stack.enter_context(ModelServer(slow_chunks=80, slow_interval=0.1))
        config = type(self).builder(binary, self.server, self.tmp_path / "home")
        self._config = structs.replace(config, **{"cwd": self.workspace()})

    def agent_config(self) -> AgentConfig:
        assert self._config is not None, "start() first"
        return self._config


def model_server_driver(
    name: str, package: NpmAgent, builder: Callable[[Path, ModelServer, Path], AgentConfig], **overrides: Any
) -> type[ModelServerDriver]:
    """A driver for a real agent CLI on the scripted model server; ``overrides`` replace class
    attributes (``prompts``, ``expect``, ``not_applicable``, ``tiers`` …)."""
    attributes = {"name": name, "package": package, "builder": staticmethod(builder), **overrides}
    return type(f"{name.title().replace('-', '')}Driver", (ModelServerDriver,), attributes)


#: opencode starts slowly (≈10-20 s per session on a cold home): it runs the two faults
#: that differ most from codex's handling.
_OPENCODE_FAULTS = ("model-hang", "sigkill-mid-tool")

CodexDriver = model_server_driver("codex", CODEX_ACP, codex_agent)
OpencodeDriver = model_server_driver(
    "opencode",
    OPENCODE,
    opencode_agent,
    prompts={k: v for k, v in MODEL_PROMPTS.items() if k in _OPENCODE_FAULTS},
    not_applicable={
        **ModelServerDriver.not_applicable,
        **{
            k: "covered on codex (opencode starts too slowly for every fault)"
            for k in MODEL_PROMPTS
            if k not in _OPENCODE_FAULTS
        },
    },
)
