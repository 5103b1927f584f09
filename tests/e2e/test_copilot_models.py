"""A session's model switched on the real Copilot CLI (BYOK, scripted model server) through the engine.

With a provider the CLI lists no models (``models.list`` needs a GitHub login, the session's
own list is empty), names the configured one as current and takes any id: the engine says so
(``free_form`` and a note) and the evidence of a switch is the next request to the provider.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from polypilot_tui.agents.copilot.model_switch import BYOK_NOTE
from polypilot_tui.engine import verbs
from polypilot_tui.engine.local import LocalEngine
from tests.support.copilot_harness import AGENT, make_manager
from tests.support.model_server import ModelServer
from tests.support.model_switch import models_asked, turn_done

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


async def test_the_switched_model_is_the_one_the_next_request_names(
    copilot_cli: Path, model_server: ModelServer, tmp_path: Path
) -> None:
    engine = LocalEngine(make_manager(copilot_cli, model_server, tmp_path))
    try:
        sid = await engine.call(verbs.NEW_SESSION, verbs.NewSession(AGENT))
        choices = await engine.call(verbs.MODELS, verbs.SessionRef(sid))
        assert choices.current == "gpt-4.1" and choices.free_form and choices.note == BYOK_NOTE
        assert [o.id for o in choices.options] == ["gpt-4.1"]

        await engine.call(verbs.SET_MODEL, verbs.SetModel(sid, "gpt-5.4"))  # not listed: a BYOK provider takes any id
        assert (await engine.call(verbs.MODELS, verbs.SessionRef(sid))).current == "gpt-5.4"  # the CLI's own answer
        assert engine.view(sid).model == "gpt-5.4"
        since = len(model_server.model_requests())
        await engine.call(verbs.SEND, verbs.Send(sid, "hello APPLE"))
        await turn_done(engine, sid, 1)
        assert models_asked(model_server, since, "APPLE")[:1] == ["gpt-5.4"]

        await engine.call(
            verbs.RECONNECT, verbs.SessionRef(sid)
        )  # a new CLI resumes the session with the configured model...
        since = len(model_server.model_requests())
        await engine.call(verbs.SEND, verbs.Send(sid, "hello PEAR"))
        await turn_done(engine, sid, 2)
        assert models_asked(model_server, since, "PEAR")[:1] == ["gpt-5.4"]  # ...and the engine set it again
    finally:
        await engine.close()
