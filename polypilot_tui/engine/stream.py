"""The record stream: one way state leaves the engine (records: :mod:`polypilot_tui.domain.records`).

Subscribers name the record types they want; a record nobody wants is never built (the
engine asks :meth:`RecordStream.wants` before it builds an :class:`EventReceived` for every
streamed token). Records are published on the engine's loop, in order; a consumer on
another loop or thread hops over itself (the dashboard posts one Textual message).

A listener that raises is logged in full (at ERROR: it fails the test it happens in) and the
record still reaches every other listener; the publisher never hears of it. Re-raising to
the publisher, even after every listener had the record, would break the engine half-way
through a change (a turn ended but not counted, a row added but not saved) because of a
consumer's bug, and would tell the user that their action failed when only a view of it did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from polypilot_tui.domain.records import STREAM_TYPES, Record

log = logging.getLogger(__name__)

Listener = Callable[[Record], None]
Unsubscribe = Callable[[], None]


class RecordStream:
    """Publish stream records to the listeners of their type."""

    def __init__(self) -> None:
        self._listeners: dict[type, list[Listener]] = {kind: [] for kind in STREAM_TYPES}

    def subscribe(self, listener: Listener, *kinds: type[Record]) -> Unsubscribe:
        """Call ``listener(change)`` for every record of ``kinds`` (all kinds when none given)."""
        wanted = kinds or STREAM_TYPES
        for kind in wanted:
            self._listeners[kind].append(listener)

        def unsubscribe() -> None:
            for kind in wanted:
                if listener in self._listeners[kind]:
                    self._listeners[kind].remove(listener)

        return unsubscribe

    def wants(self, kind: type[Record]) -> bool:
        """Somebody listens to ``kind`` (build the record only then)."""
        return bool(self._listeners[kind])

    def publish(self, change: Record) -> None:
        """Deliver ``change`` to every listener of its type; one that fails is logged in full."""
        for listener in tuple(self._listeners[type(change)]):
            try:
                listener(change)
            except Exception:  # a listener's bug must not break the engine mid-change (module docstring)
                log.exception("change listener failed on %s", type(change).__name__)
