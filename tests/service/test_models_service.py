"""Switching a session's model through the engine service (a real ``polypilot serve`` process)."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.service.remote import RemoteEngine
from tests.support.engine_service import running_engine, short_state_dir
from tests.support.waiting import until

pytestmark = pytest.mark.slow


async def test_an_attached_dashboard_lists_and_switches_and_a_restarted_engine_keeps_it() -> None:
    state = short_state_dir()
    try:
        async with running_engine(state, keep=True) as engine:
            mirror = RemoteEngine(lambda: asyncio.sleep(0, engine.socket), reconnect=False)
            await mirror.start()
            try:
                sid = await mirror.call(verbs.NEW_SESSION, verbs.NewSession("demo", "one"))
                choices = await mirror.call(verbs.MODELS, verbs.SessionRef(sid))
                assert choices.current == "demo-model"
                assert [o.id for o in choices.options] == ["demo-model", "demo-fast", "demo-deep"]
                assert choices.options[1].name == "Demo Fast"
                await mirror.call(verbs.SET_MODEL, verbs.SetModel(sid, "demo-deep"))
                await until(lambda: mirror.view(sid).model == "demo-deep", 20, "the new model in the mirror")
                assert (await mirror.call(verbs.MODELS, verbs.SessionRef(sid))).current == "demo-deep"
                with pytest.raises(EngineError, match="does not offer the model 'gpt-9'"):
                    await mirror.call(verbs.SET_MODEL, verbs.SetModel(sid, "gpt-9"))
                assert await mirror.call(verbs.SEND, verbs.Send(sid, "!slow")) == "sent"
                await until(lambda: mirror.view(sid).status.busy, 20, "the turn")
                with pytest.raises(EngineError, match="a turn is running"):
                    await mirror.call(verbs.SET_MODEL, verbs.SetModel(sid, "demo-fast"))
                await mirror.call(verbs.STOP, verbs.SessionRef(sid))
                with pytest.raises(EngineError, match="no session 'nope'"):
                    await mirror.call(verbs.MODELS, verbs.SessionRef("nope"))
            finally:
                await mirror.detach(stop_engine=False)
        async with running_engine(state) as engine:  # the same state folder, a new engine process
            mirror = RemoteEngine(lambda: asyncio.sleep(0, engine.socket), reconnect=False)
            await mirror.start()
            try:
                assert mirror.view(sid).model == "demo-deep"
                assert (
                    await mirror.call(verbs.MODELS, verbs.SessionRef(sid))
                ).current == "demo-deep"  # its new agent was set again
            finally:
                await mirror.detach(stop_engine=False)
    finally:
        shutil.rmtree(state, ignore_errors=True)
