"""The mirror's histories (service/histories.py), in virtual time: a fetch that fails is asked
for again once, after a pause, and the redraw then shows it; looks meanwhile (a streaming
session redraws many times a second) do not ask the engine again."""

from __future__ import annotations

import pytest

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.engine.api import EngineError
from polypilot_tui.service.histories import RETRY_AFTER, Histories


@pytest.mark.parametrize(
    "failure",
    [
        EngineError("saved chat rows of s cannot be read now; ask again later"),  # the engine's 409
        pytest.param(  # a bug (in the client, or in reading its answer): the same, and logged in full
            KeyError("a bug"), marks=pytest.mark.expect_errors(r"the fetch of the history of s failed\nKeyError")
        ),
    ],
)
async def test_a_failed_fetch_is_retried_once_after_a_pause_not_at_every_look(
    fake_clock: FakeClock, failure: Exception
) -> None:
    rows = [ChatItem(ItemKind.USER, "hello", 0.0)]
    fetches: list[str] = []
    loaded: list[str] = []

    async def fetch(session_id: str) -> list[ChatItem]:
        fetches.append(session_id)
        if len(fetches) == 1:
            raise failure
        return list(rows)

    mirror = Histories(fetch, loaded.append, fake_clock)
    assert mirror.get("s") == ()
    await fake_clock.settle()  # the fetch fails
    for _ in range(20):
        assert mirror.get("s") == ()
        await fake_clock.advance(RETRY_AFTER / 40)
    assert fetches == ["s"] and loaded == []
    await fake_clock.advance(RETRY_AFTER / 2)
    assert loaded == ["s"]  # the redraw that asks again
    assert mirror.get("s") == ()
    await fake_clock.settle()
    assert fetches == ["s", "s"] and loaded == ["s", "s"] and mirror.get("s") == tuple(rows)
