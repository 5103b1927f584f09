"""The Copilot column of the chaos matrix: the real Copilot CLI against the scripted model.

:class:`CopilotDriver` is a :class:`~tests.chaos.drivers.ModelServerDriver` whose agent is the
pinned Copilot CLI (tests/support/copilot_e2e.py ``copilot_agent``), with the same model
prompts and short tiers as the ACP agents. Registering it is one line in
tests/chaos/registry.py::

    from tests.chaos.copilot_driver import CopilotDriver
    BACKENDS["copilot"] = CopilotDriver

Until that line is there, tests/chaos/test_copilot_faults.py runs the same cells itself.

Copilot-only scenario (not a matrix row yet): ``stop-during-tool`` — Stop while a shell
command runs: the turn ends aborted at once, the tool row is closed (the CLI sends no
completion for an aborted tool), no shell is left running, and the session answers again.
"""

from __future__ import annotations

from pathlib import Path

from msgspec import structs

from polypilot_tui.agents.npm_cache import COPILOT_CLI
from polypilot_tui.config import AgentConfig
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.infra.process_tree import descendants
from tests.chaos.drivers import MODEL_PROMPTS, Driver, Expect, ModelServerDriver
from tests.chaos.scenarios import Outcome, finish, settle_turns
from tests.support.copilot_e2e import copilot_agent
from tests.support.copilot_harness import running_under
from tests.support.model_server import ModelServer

STOP_DURING_TOOL = "stop-during-tool"


def _copilot_builder(binary: Path, server: ModelServer, home: Path) -> AgentConfig:
    config = copilot_agent(binary, server, home / "copilot-home", home / "work")
    return structs.replace(config, **{"name": "copilot"})


class CopilotDriver(ModelServerDriver):
    """The pinned Copilot CLI (one process shared by the sessions) through the real CopilotBackend."""

    name = "copilot"
    package = COPILOT_CLI
    builder = staticmethod(_copilot_builder)
    prompts = {**MODEL_PROMPTS, STOP_DURING_TOOL: "TOOL CMD=`sleep 300`"}
    expect = {
        **ModelServerDriver.expect,
        # The follow-up model call hangs after the tool: the used-tools tier (4 s), then the
        # CLI's own log is stale (it writes nothing while waiting), so the turn is stuck,
        # or completed by Case B; either ends it well inside the tool tier.
        "hang-after-final-tool": Expect(("completed", "stuck"), 12.0, at_least=3.0),
        # Restored mid-turn: the CLI dropped the SLOW turn with the old process, the resume
        # says so (lost turn) and the turn fails at once with a one-key resend.
        "restart-mid-turn": Expect(("failed", "stuck"), 6.0),
        STOP_DURING_TOOL: Expect("aborted", 5.0),
    }
    # Twenty sessions share one CLI (agents/copilot/server.py), so this backend runs them.
    not_applicable = {
        **{k: v for k, v in ModelServerDriver.not_applicable.items() if k != "twenty-sessions"},
        "zero-idle": "the Copilot CLI always sends session.idle; the scripted model cannot make it lose one",
    }


async def stop_during_tool(driver: Driver, scenario: str) -> Outcome:
    """Stop while ``sleep 300`` runs: aborted at once, tool row closed, no shell left behind."""
    rig = driver.rig()
    sid = await driver.new_session(rig)
    session = rig.manager.session(sid)
    await rig.manager.send(sid, driver.prompt(scenario))
    await rig.until(lambda: bool(session.turn and session.turn.active_tools), 30.0, "the tool to run")
    pid = getattr(rig.backend(sid), "pid", None)
    assert pid is not None
    await rig.until(lambda: running_under(pid, "sleep"), 10.0, "the tool's sleep to run")
    shells = descendants(pid)
    start = rig.now()
    await rig.manager.stop(sid)
    await settle_turns(rig, sid, 0, 10.0, "Stop to end the turn")
    result = Outcome(rig, sid, rig.outcomes(sid), rig.now() - start, rig.reasons(sid)[0], driver.expect[scenario])
    tools = [i for i in session.history if i.kind is ItemKind.TOOL]
    if not tools or any(t.tool_status == "running" for t in tools):
        result.problems.append(f"the stopped tool row must be closed: {[(t.tool_name, t.tool_status) for t in tools]}")
    if getattr(rig.backend(sid), "pid", None) != pid:
        result.problems.append("Stop killed the agent instead of aborting the turn")

    def shells_gone() -> bool:
        return not [p for p in shells if Path(f"/proc/{p}").exists() and _not_zombie(p)]

    try:
        await rig.until(shells_gone, 5.0, "the aborted shell to exit")
    except AssertionError:
        result.problems.append(f"the shell of the stopped tool is still running: {shells}")
    result.note = f"{len(shells)} tool process(es) ended by the abort"
    return await finish(driver, result, scenario)


def _not_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
