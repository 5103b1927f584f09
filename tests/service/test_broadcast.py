"""One prompt to several sessions: ``polypilot send --to`` against a real engine (``polypilot
serve``) on demo agents. Each session's turn is its own: a busy one queues the prompt, one that
hangs ends at its watchdog tier while the others complete, one that cannot take it is refused
with the reason and the others still get it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polypilot_tui.domain.fan_out import MAX_BROADCAST
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import BadRequest
from polypilot_tui.service.client import EngineClient
from tests.service.test_commands import finish, start
from tests.support.engine_service import running_engine, short_state_dir
from tests.support.waiting import until_answer

pytestmark = pytest.mark.slow

AGENTS = '[hanging]\nkind = "demo"\nscript = "hang"\n\n[slowpoke]\nkind = "demo"\nscript = "slow"\n'


async def ended(client: EngineClient, sid: str, turns: int = 1) -> SessionView:
    return await until_answer(
        lambda: client.call(verbs.SESSION_VIEW, verbs.SessionRef(sid)),
        lambda view: view.turns >= turns and not view.status.busy,
        60,
        f"{sid}'s turn to end",
    )


async def test_a_broadcast_reaches_each_session_on_its_own(tmp_path: Path) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(AGENTS)
    env = {"POLYPILOT_AGENTS_FILE": str(agents), "POLYPILOT_WATCHDOG__INACTIVITY": "2"}
    state = short_state_dir()
    async with running_engine(state, env) as engine:
        client = engine.client
        idle = await client.call(verbs.NEW_SESSION, verbs.NewSession("demo", "idle"))
        busy = await client.call(verbs.NEW_SESSION, verbs.NewSession("slowpoke", "busy"))
        hung = await client.call(verbs.NEW_SESSION, verbs.NewSession("hanging", "hung"))
        assert await client.call(verbs.SEND, verbs.Send(busy, "warm up")) == "sent"

        done = await finish(await start(state, "send", "--to", f"idle,{busy},{hung},nope", "hi all", env=env))
        lines = done.out.splitlines()
        assert done.code == 1, done  # one was refused: said by the exit code, the others still got it
        assert lines[0].startswith(f"{idle}  idle  sent") and lines[1].startswith(f"{busy}  busy  queued")
        assert lines[2].startswith(f"{hung}  hung  sent")
        assert lines[3] == "nope  ?  refused: no session 'nope' (see `polypilot ls`)"
        twice = await finish(await start(state, "send", "--to", f"nope,nope,{idle},idle", "again", env=env))
        assert twice.code == 1 and len(twice.out.splitlines()) == 2, twice  # each named once, whichever way

        hung_view = await ended(client, hung)
        assert hung_view.last_outcome == "stuck"  # the watchdog's tier ended it, nobody else's turn
        idle_view = await ended(client, idle)
        assert idle_view.last_outcome == "completed"
        busy_view = await ended(client, busy, turns=2)  # its own turn, then the queued prompt's
        assert busy_view.last_outcome == "completed"
        history = [item.text for item in (await client.call(verbs.HISTORY_PAGE_OF, verbs.HistoryRange(busy))).items]
        assert history.count("hi all") == 1

        empty = await finish(await start(state, "send", "--to", idle, "-", env=env))  # stdin is empty
        assert empty.code == 1 and "the prompt is empty: nothing was sent" in empty.err, empty
        as_json = await finish(await start(state, "send", "--json", "--to", f"{idle},{idle}", "once", env=env))
        assert as_json.code == 0 and json.loads(as_json.out) == [{"session_id": idle, "result": "sent", "reason": ""}]


async def test_a_broadcast_is_refused_whole_only_when_it_names_nothing_or_too_much() -> None:
    async with running_engine() as engine:
        with pytest.raises(BadRequest, match="name the sessions"):
            await engine.client.call(verbs.BROADCAST, verbs.Broadcast((), "hi"))
        with pytest.raises(BadRequest, match=f"at most {MAX_BROADCAST}"):
            await engine.client.call(verbs.BROADCAST, verbs.Broadcast(tuple(map(str, range(MAX_BROADCAST + 1))), "hi"))
        with pytest.raises(BadRequest, match="empty"):
            await engine.client.call(verbs.BROADCAST, verbs.Broadcast(("a",), " \n"))
