"""A session's model switched on real ACP agents (opencode, codex-acp) through the engine.

The evidence is the scripted model server's record: the first agent-loop request after the
switch names the new model, and so does the first one after a reconnect (a new agent
process, which opens the session with its configured model: the engine sets the choice again).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from msgspec import structs

from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from tests.support.model_server import ModelServer
from tests.support.model_switch import models_asked, turn_done

pytestmark = pytest.mark.timeout(180)

#: (the configured model as the agent names it, the one to switch to, what the request then names)
SWITCH = {
    "opencode": ("mock/mock-model", "mock/mock-other", "mock-other"),
    "codex": ("mock-model", "gpt-5.4", "gpt-5.4"),
}


def with_second_model(agent: AgentConfig, name: str) -> AgentConfig:
    """opencode's other offered models are remote: a second one on the scripted server is added."""
    if name != "opencode":
        return agent
    config = json.loads(agent.env["OPENCODE_CONFIG_CONTENT"])
    models = config["provider"]["mock"]["models"]
    models["mock-other"] = {**models["mock-model"], "name": "Mock Other"}
    return structs.replace(agent, env={**agent.env, "OPENCODE_CONFIG_CONTENT": json.dumps(config)})


async def test_the_switched_model_is_the_one_the_next_request_names(
    acp_agent: AgentConfig, agent_name: str, workspace: Path, model_server: ModelServer, tmp_path: Path
) -> None:
    first, second, wire = SWITCH[agent_name]
    config = structs.replace(with_second_model(acp_agent, agent_name), **{"cwd": workspace})
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False)
    engine = LocalEngine(SessionManager(settings, AgentCatalog({agent_name: config}), SystemClock()))
    try:
        sid = await engine.call(verbs.NEW_SESSION, verbs.NewSession(agent_name))
        choices = await engine.call(verbs.MODELS, verbs.SessionRef(sid))
        assert choices.current == first and engine.view(sid).model == first
        assert {first, second} <= {o.id for o in choices.options}
        with pytest.raises(EngineError, match="does not offer the model 'nope/nope'"):
            await engine.call(verbs.SET_MODEL, verbs.SetModel(sid, "nope/nope"))

        await engine.call(verbs.SET_MODEL, verbs.SetModel(sid, second))
        assert (await engine.call(verbs.MODELS, verbs.SessionRef(sid))).current == second  # the agent's own answer
        assert engine.view(sid).model == second
        since = len(model_server.model_requests())
        await engine.call(verbs.SEND, verbs.Send(sid, "hello APPLE"))
        await turn_done(engine, sid, 1)
        assert models_asked(model_server, since, "APPLE")[:1] == [wire]

        await engine.call(
            verbs.RECONNECT, verbs.SessionRef(sid)
        )  # a new agent process: its session starts on the configured model
        since = len(model_server.model_requests())
        await engine.call(verbs.SEND, verbs.Send(sid, "hello PEAR"))
        await turn_done(engine, sid, 2)
        assert models_asked(model_server, since, "PEAR")[:1] == [wire]
        assert engine.view(sid).model == second
    finally:
        await engine.close()
