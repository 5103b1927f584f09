"""A RemoteEngine's history mirror holds a window, not every row: the last page the dashboard
read, joined by the pages read above it, kept up to date by the stream — also by the changes
that come while a page is on its way."""

from __future__ import annotations

import asyncio
from typing import Any

from polypilot_tui.domain.changes import ItemAdded, ItemReplaced
from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.wire import to_plain
from polypilot_tui.service.histories import Histories


def row(n: int, text: str = "") -> ChatItem:
    return ChatItem(ItemKind.SYSTEM, text or f"row {n}", float(n))


class Engine:
    """The engine service's history endpoint over a list of rows; counts requests."""

    def __init__(self, rows: list[ChatItem]) -> None:
        self.rows = rows
        self.asked: list[tuple[int, int]] = []
        self.hold: asyncio.Event | None = None

    async def get(self, path: str, start: int = 0, limit: int = 200) -> dict[str, Any]:
        self.asked.append((start, limit))
        snapshot = list(self.rows)  # what the engine had when it answered
        if self.hold is not None:
            await self.hold.wait()
        page = snapshot[start : start + min(limit, 1000)]
        return {"total": len(snapshot), "start": start, "items": [to_plain(i) for i in page]}


def histories(engine: Engine) -> Histories:
    return Histories(lambda: engine, lambda sid: None)  # type: ignore[arg-type, return-value]


async def test_the_last_page_starts_the_window_and_pages_above_join_it() -> None:
    engine = Engine([row(i) for i in range(5000)])
    mirror = histories(engine)
    page = await mirror.page("s", 4940, 5000)
    assert (page.start, page.total, page.items) == (4940, 5000, tuple(engine.rows[4940:]))
    assert engine.asked == [(4940, 60)]
    tail = mirror.tail("s", 0, 5000)
    assert (tail.start, len(tail.items)) == (4940, 60)  # only what was read is held
    assert (await mirror.page("s", 4950, 5000)).items == tuple(engine.rows[4950:])
    assert len(engine.asked) == 1  # held: answered without asking
    above = await mirror.page("s", 4880, 4940)
    assert above.items == tuple(engine.rows[4880:4940]) and mirror.tail("s", 0, 5000).start == 4880
    # A long turn's tool row up there completes: the mirror (and so the pane) sees it.
    mirror.apply(ItemReplaced("s", 4890, row(4890, "done")))
    assert mirror.tail("s", 4890, 5000).items[0].text == "done"
    mirror.apply(ItemReplaced("s", 10, row(10, "far above")))  # not held: nobody shows it from here
    mirror.apply(ItemAdded("s", 5000, row(5000)))
    assert mirror.tail("s", 4999, 5001).items == (engine.rows[4999], row(5000))


async def test_rows_streamed_while_the_first_page_is_read_are_not_lost() -> None:
    engine = Engine([row(i) for i in range(100)])
    engine.hold = asyncio.Event()
    mirror = histories(engine)
    reading = asyncio.create_task(mirror.page("s", 40, 100))
    await asyncio.sleep(0)
    engine.rows.append(row(100))
    mirror.apply(ItemAdded("s", 100, row(100)))
    mirror.apply(ItemReplaced("s", 60, row(60, "replaced meanwhile")))
    engine.hold.set()
    page = await reading
    assert page.total == 100  # the page is what the engine had
    held = mirror.tail("s", 40, 101)
    assert held.start == 40 and held.total == 101 and held.items[-1] == row(100)
    assert held.items[20].text == "replaced meanwhile"


async def test_asking_for_every_row_reads_them_all_once_and_replaces_the_window() -> None:
    engine = Engine([row(i) for i in range(2500)])
    mirror = histories(engine)
    await mirror.page("s", 2440, 2500)
    assert mirror.get("s") == tuple(engine.rows[2440:])  # what is here so far, while all is read
    for _ in range(20):
        await asyncio.sleep(0)
    assert mirror.get("s") == tuple(engine.rows)
    assert engine.asked[1:] == [(0, 1000), (1000, 1000), (2000, 1000)]
