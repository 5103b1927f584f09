"""Saving problems told to the user: once when they start, once when they end."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

from polypilot_tui.domain.dataclass_on_use import dataclass

log = logging.getLogger(__name__)

Severity = Literal["error", "warning", "information"]


@dataclass(frozen=True)
class Notice:
    """A saving problem or its end: a sentence with the reason and the path."""

    key: str
    message: str
    severity: Severity = "error"

    @property
    def title(self) -> str:
        """What it is about, in a word (a toast's title), by its key."""
        for prefix, title in (("restore", "Restore"), ("worktrees", "Worktrees"), ("engine", "Engine")):
            if self.key.startswith(prefix):
                return title
        return "Saving"


NoticeListener = Callable[[Notice], None]


class NoticeBoard:
    """Problems told and not over yet, and everyone who listens (all on one loop)."""

    def __init__(self) -> None:
        self._open: dict[str, Notice] = {}
        self.told: list[Notice] = []
        """Every notice so far, oldest first (bounded: one per distinct problem and end)."""
        self._listeners: list[NoticeListener] = []

    def listen(self, listener: NoticeListener) -> Callable[[], None]:
        """Call ``listener`` with every notice so far and every later one; returns a stop."""
        self._listeners.append(listener)
        for notice in list(self.told):
            listener(notice)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    def open(self, key: str) -> bool:
        """Is the problem ``key`` going on?"""
        return key in self._open

    def tell(self, key: str, message: str, severity: Severity = "error") -> None:
        """Tell a problem once (until :meth:`over` says it ended)."""
        if key in self._open:
            return
        notice = self._open[key] = Notice(key, message, severity)
        self.emit(notice)

    def over(self, key: str, message: str) -> None:
        """A told problem has ended: say so once."""
        if self._open.pop(key, None) is not None:
            self.emit(Notice(f"{key}:over", message, "information"))

    def emit(self, notice: Notice) -> None:
        """Tell ``notice`` to every listener as it is (one relayed from elsewhere)."""
        log.log(logging.ERROR if notice.severity == "error" else logging.WARNING, "%s", notice.message)
        if len(self.told) < 1000:
            self.told.append(notice)
        for listener in list(self._listeners):
            try:
                listener(notice)
            except Exception:  # a listener's bug is logged in full; the save that told goes on, as do the others
                log.exception("notice listener failed")
