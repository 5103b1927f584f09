"""A restore reads no chat: a saved session's rows are read (from the real SQLite file) when
somebody asks for them — a page for the chat pane, all of them for a command — and then they
are complete and in order; new rows go after the saved ones; nothing on disk is dropped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import Persistence, attach_persistence
from polypilot_tui.storage.history import HistoryDB
from polypilot_tui.storage.registry import SessionRecord
from polypilot_tui.storage.store import Store
from tests.unit.test_store import items

SIZE = 500


def seed(state: Path, sessions: dict[str, list[ChatItem]], gaps: bool = False) -> None:
    store = Store(state)
    now = time.time()
    store.registry.save([SessionRecord(id=sid, name=sid, agent="demo", created_at=now) for sid in sessions], now)
    step = 3 if gaps else 1
    store.history.write([(sid, i * step, item) for sid, rows in sessions.items() for i, item in enumerate(rows)])
    store.close()


class Reads:
    """Counts the rows the engine reads from history.db, by how it reads them."""

    def __init__(self, db: HistoryDB) -> None:
        self.ranges: list[tuple[str, int, int]] = []
        self.whole: list[str] = []
        load_range, load = db.load_range, db.load

        def counted_range(sid: str, start: int, stop: int) -> Any:
            self.ranges.append((sid, start, stop))
            return load_range(sid, start, stop)

        def counted_load(sid: str) -> Any:
            self.whole.append(sid)
            return load(sid)

        db.load_range = counted_range  # type: ignore[method-assign]
        db.load = counted_load  # type: ignore[method-assign]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Reads]]:
    """Every Store opened in the test counts its reads (the restore's among them)."""
    made: list[Reads] = []
    original = Store.__init__

    def init(self: Store, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(Reads(self.history))

    monkeypatch.setattr(Store, "__init__", init)
    yield made


async def start(state: Path) -> LocalEngine:
    settings = Settings(_env_file=None, state_dir=state, record=False)  # type: ignore[call-arg]
    engine = LocalEngine(SessionManager(settings, load_agents(None), SystemClock()), attach_persistence)
    await engine.start()
    return engine


def persistence(engine: LocalEngine) -> Persistence:
    assert engine.persistence is not None
    return engine.persistence


async def test_a_restored_session_holds_no_rows_until_asked_then_all_in_order(
    tmp_path: Path, reads: list[Reads]
) -> None:
    chats = {f"s{n}": items(SIZE) for n in range(3)}
    seed(tmp_path, chats)
    engine = await start(tmp_path)
    counted = reads[-1]  # the engine's store (the seed's came first)
    assert counted.ranges == [] and counted.whole == []  # the restore read no chat
    for sid in chats:
        session = engine.manager.session(sid)
        assert session.history == [] and session.history_start == SIZE
        assert engine.view(sid).history_len == SIZE
    assert engine.history("s1") == tuple(chats["s1"])  # asked: complete and in order
    assert counted.ranges == [("s1", 0, SIZE)]
    assert engine.manager.session("s1").history_start == 0  # held from now on: read once
    assert engine.history("s1") == tuple(chats["s1"]) and len(counted.ranges) == 1
    assert engine.manager.session("s0").history == []  # the others still are not read
    await engine.close()


async def test_a_page_is_read_from_storage_without_holding_the_rest(tmp_path: Path, reads: list[Reads]) -> None:
    rows = items(SIZE)
    seed(tmp_path, {"s": rows})
    engine = await start(tmp_path)
    counted = reads[-1]  # the engine's store (the seed's came first)
    page = await engine.history_page("s", SIZE - 60, SIZE)
    assert (page.start, page.items, page.total) == (SIZE - 60, tuple(rows[-60:]), SIZE)
    assert counted.ranges == [("s", SIZE - 60, SIZE)]
    assert engine.manager.session("s").history == []  # a page is handed over, not held
    earlier = await engine.history_page("s", -10, 50)  # clipped to the history
    assert (earlier.start, earlier.items) == (0, tuple(rows[:50]))
    # A page across the saved rows and the ones added since reads only the saved part.
    engine.manager.session("s").add_item(ItemKind.USER, "after the restart", 1.0)
    both = await engine.history_page("s", SIZE - 2, SIZE + 5)
    assert [i.text for i in both.items] == [rows[-2].text, rows[-1].text, "after the restart"]
    assert counted.ranges[-1] == ("s", SIZE - 2, SIZE) and both.total == SIZE + 1
    tail = engine.history_tail("s", 0)  # what is held, at once: the new row only
    assert (tail.start, [i.text for i in tail.items]) == (SIZE, ["after the restart"])
    await engine.close()


async def test_new_rows_go_after_the_saved_ones_and_everything_comes_back(tmp_path: Path) -> None:
    rows = items(SIZE)
    seed(tmp_path, {"s": rows})
    engine = await start(tmp_path)
    engine.manager.session("s").add_item(ItemKind.USER, "one more", 1.0)
    await engine.close()
    again = await start(tmp_path)
    assert again.view("s").history_len == SIZE + 1
    assert [i.text for i in again.history("s")] == [i.text for i in rows] + ["one more"]
    await again.close()


async def test_a_tool_left_running_is_settled_at_restore_reading_only_from_it_on(
    tmp_path: Path, reads: list[Reads]
) -> None:
    rows = items(SIZE)
    rows[SIZE - 3] = ChatItem(ItemKind.TOOL, "half", 1.0, "c1", "bash", "running", "make")
    seed(tmp_path, {"s": rows})
    engine = await start(tmp_path)
    counted = reads[-1]  # the engine's store (the seed's came first)
    assert counted.ranges == [("s", SIZE - 3, SIZE)]  # from the open tool on: settled now
    session = engine.manager.session("s")
    assert session.history_start == SIZE - 3 and session.history[0].tool_status == "interrupted"
    await persistence(engine).flush()
    await engine.close()
    again = await start(tmp_path)
    history = again.history("s")
    assert history[SIZE - 3].tool_status == "interrupted" and history[: SIZE - 3] == tuple(rows[: SIZE - 3])
    assert again.manager.session("s").history_start == 0
    await again.close()


async def test_closing_and_undoing_keeps_every_row(tmp_path: Path) -> None:
    rows = items(SIZE)
    seed(tmp_path, {"s": rows, "t": items(4)})
    engine = await start(tmp_path)
    assert await engine.close_session("s")
    await persistence(engine).flush()  # its rows are deleted from disk now
    await engine.reopen("s")
    await persistence(engine).flush()
    await engine.close()
    again = await start(tmp_path)
    assert again.history("s") == tuple(rows)
    await again.close()


async def test_a_history_with_gaps_is_read_whole_once_and_renumbered(tmp_path: Path, reads: list[Reads]) -> None:
    rows = items(30)
    seed(tmp_path, {"s": rows}, gaps=True)
    engine = await start(tmp_path)
    counted = reads[-1]  # the engine's store (the seed's came first)
    assert counted.whole == ["s"] and engine.manager.session("s").history_start == 0
    engine.manager.session("s").add_item(ItemKind.USER, "new", 1.0)
    await engine.close()
    again = await start(tmp_path)
    assert [i.text for i in again.history("s")] == [i.text for i in rows] + ["new"]
    await again.close()
