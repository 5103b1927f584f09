"""One prompt to several sessions (the engine's BROADCAST): the sessions marked in the sidebar
(ctrl+t), and how what each did with the prompt is told.

Marks are session ids, so they stay on their sessions however the list re-orders; a session
that leaves the list leaves the marks, the others stay. Each session takes the prompt or
refuses it on its own (a busy one queues it): a refusal is told with the session and the
reason, never lost — the text goes back to that session's draft, or to the box when no
session took it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence

from textual.widget import Widget

from polypilot_tui.domain.fan_out import MAX_BROADCAST, BroadcastResult
from polypilot_tui.domain.text import one_line
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine
from polypilot_tui.ui.action_failures import Failed, attempt
from polypilot_tui.ui.formatting import plural
from polypilot_tui.ui.widgets.prompt_editor import PromptEditor

log = logging.getLogger(__name__)

SHOWN_REFUSALS = 8
"""Refusals one toast names (the rest are counted)."""


class Marks:
    """The sessions marked for a broadcast (at most ``limit``: what one broadcast reaches)."""

    def __init__(self, limit: int = MAX_BROADCAST) -> None:
        self._ids: set[str] = set()
        self.limit = limit

    @property
    def full(self) -> bool:
        """As many sessions are marked as one broadcast reaches."""
        return len(self._ids) >= self.limit

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> frozenset[str]:
        """The marked sessions' ids."""
        return frozenset(self._ids)

    def toggle(self, session_id: str) -> bool:
        """Mark a session, or unmark it when it was; whether it is marked now (a session is not
        marked past the limit)."""
        if session_id in self._ids:
            self._ids.discard(session_id)
            return False
        if self.full:
            return False
        self._ids.add(session_id)
        return True

    def unmark(self, ids: Iterable[str]) -> None:
        """Unmark these sessions."""
        self._ids.difference_update(ids)

    def clear(self) -> int:
        """Unmark every session; how many were marked."""
        count = len(self._ids)
        self._ids.clear()
        return count

    def keep_only(self, live: Collection[str]) -> bool:
        """Forget the sessions that left the list; whether any did."""
        gone = self._ids - set(live)
        self._ids -= gone
        return bool(gone)

    def in_order(self, ids: Iterable[str]) -> list[str]:
        """The marked sessions, in the order of ``ids`` (the sidebar's)."""
        return [sid for sid in ids if sid in self._ids]


def refusals_text(refused: Sequence[BroadcastResult], name: dict[str, str]) -> str:
    """The refusals, one line each: the session and why (the first :data:`SHOWN_REFUSALS`)."""
    lines = [
        f"{one_line(name.get(d.session_id, d.session_id), 40)}: {one_line(d.reason, 200)}"
        for d in refused[:SHOWN_REFUSALS]
    ]
    if len(refused) > SHOWN_REFUSALS:
        lines.append(f"… and {len(refused) - SHOWN_REFUSALS} more")
    return "\n".join(lines)


class Broadcaster:
    """Sends a prompt typed in the box to the marked sessions (BROADCAST) and tells the outcome."""

    def __init__(
        self,
        owner: Widget,
        engine: Engine,
        editor: PromptEditor,
        *,
        names: Callable[[str], str],
        kept: Callable[[], None],
        unreachable: Callable[[str], str] = lambda session_id: "",
    ) -> None:
        self._owner = owner
        """Where the toasts come from (the main screen)."""
        self._engine = engine
        self._editor = editor
        """Where a refused prompt goes back to (the box, or a session's draft)."""
        self._names = names
        self._kept = kept
        """Called when a draft was given text back (it is saved)."""
        self._unreachable = unreachable
        """Why a session's machine does not answer ("" when it does): it is refused here, and
        the others still get the prompt."""

    async def send(self, typed_for: str, targets: list[str], text: str) -> list[str]:
        """Send to every marked session: each refusal is told, and its text kept (the box gets
        it back when no session took it; else each refusing session's draft). The sessions
        that took it."""
        names = {sid: self._names(sid) for sid in targets}
        down = [BroadcastResult(sid, "refused", why) for sid in targets if (why := self._unreachable(sid))]
        reachable = tuple(sid for sid in targets if not self._unreachable(sid))
        sent: tuple[BroadcastResult, ...] | Failed = ()
        if reachable:
            request = verbs.Broadcast(reachable, text)
            sent = await attempt(log, "Broadcast", self._engine.call(verbs.BROADCAST, request))
        results = sent if isinstance(sent, Failed) else (*sent, *down)
        if isinstance(results, Failed):
            self._editor.give_back(typed_for, text)
            self._kept()
            self._owner.notify(
                f"Not sent: {results.said}. Your text is back in the prompt.",
                severity="error",
                timeout=15,
                markup=False,
            )
            return []
        refused = [r for r in results if r.result == "refused"]
        took = len(results) - len(refused)
        queued = sum(1 for r in results if r.result == "queued")
        if not took:
            self._editor.give_back(typed_for, text)
            self._kept()
            self._owner.notify(
                f"No marked session took it; your text is back in the prompt.\n{refusals_text(refused, names)}",
                title=f"Not sent to {plural(len(refused), 'session')}",
                severity="error",
                timeout=15,
                markup=False,
            )
            return []
        for refusal in refused:
            self._editor.give_back(refusal.session_id, text)
        if refused:
            self._kept()
            self._owner.notify(
                f"Sent to {took} of {len(results)}; the text is in the draft of each that refused, and only "
                "they stay marked (Enter sends to them alone):\n" + refusals_text(refused, names),
                title=f"Not sent to {plural(len(refused), 'session')}",
                severity="warning",
                timeout=15,
                markup=False,
            )
        else:
            self._owner.notify(
                f"Sent to {plural(took, 'session')}"
                + (f" ({queued} queued behind a running turn)." if queued else "."),
                timeout=4,
                markup=False,
            )
        return [r.session_id for r in results if r.result != "refused"]
