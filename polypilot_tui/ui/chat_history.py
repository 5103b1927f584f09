"""What a chat log is handed of a session's history, read from the engine a page at a time.

A log that shows its session already gets the rows from its oldest on, as the engine holds
them (never a copy of the whole history); a new log gets the last page, read from storage
when the engine does not hold it; "show earlier" gets the page above.
"""

from __future__ import annotations

import logging

from polypilot_tui.domain.chat import HistoryPage, ItemKind
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine.api import Engine
from polypilot_tui.ui.widgets.chat_log import FIRST, ChatLog

log = logging.getLogger(__name__)


async def history_to_show(engine: Engine, chat: ChatLog | None, view: SessionView) -> HistoryPage:
    """The rows ``chat`` needs to show ``view``'s session now."""
    if chat is not None and chat.opened:
        return engine.history_tail(view.id, chat.first)
    total = view.history_len
    try:
        page = await engine.history_page(view.id, total - FIRST, total)
    except Exception as exc:  # noqa: BLE001 - the log opens with what is at hand; "show earlier" asks again
        log.warning("the last page of %s could not be read: %s", view.id, exc)
        return engine.history_tail(view.id, total)
    # Rows added while the page was read (it may have come from another process).
    tail = engine.history_tail(view.id, page.stop)
    if tail.start != page.stop or not tail.items:
        return page
    return HistoryPage(page.start, page.items + tail.items, tail.total)


async def earlier_page(engine: Engine, asked: ChatLog.Earlier) -> HistoryPage:
    """The page a log asked for (an empty one when it cannot be read now: asked again later)."""
    try:
        return await engine.history_page(asked.chat.session_id, asked.start, asked.end)
    except Exception as exc:  # noqa: BLE001 - the button stays
        log.warning("earlier rows of %s could not be read: %s", asked.chat.session_id, exc)
        return HistoryPage(asked.end, (), asked.end)


async def last_text(engine: Engine, session_id: str, kind: ItemKind) -> str:
    """The text of the session's last row of ``kind`` ("" when it has none): the rows at hand
    first, then a page at a time backwards (never the whole history at once)."""
    page = engine.history_tail(session_id, 0)
    while True:
        found = next((item.text for item in reversed(page.items) if item.kind is kind), None)
        if found is not None:
            return found
        if page.start <= 0:
            return ""
        page = await engine.history_page(session_id, max(0, page.start - BACKWARDS), page.start)
        if not page.items:
            return ""


BACKWARDS = 200
"""Rows read per step of :func:`last_text`."""
