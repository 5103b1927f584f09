"""Pure text for the machines of a fleet: a host's header row in the sidebar, its state in words.

Like ui/formatting.py, every function takes the times it needs (``now`` of the engine clock,
and ``wall_now`` for a time of day), so the same host and the same times give the same words.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from polypilot_tui.domain.hosts import LOCAL, HostState, HostView
from polypilot_tui.domain.text import compact_duration, one_line
from polypilot_tui.domain.view import SessionView
from polypilot_tui.ui.formatting import plural

HOST_ICONS: dict[HostState, str] = {
    HostState.LIVE: "●",
    HostState.CONNECTING: "◌",
    HostState.STALE: "◑",
    HostState.UNREACHABLE: "✕",
    HostState.OTHER_VERSION: "⚠",
}
"""One single-cell glyph per host state (this machine is always live)."""

SHORT_REASON = 40
"""Characters of a reason a header shows (the tooltip and F2 show it whole)."""


def time_of_day(when: float, now: float, wall_now: float) -> str:
    """``HH:MM`` (local time) of ``when``, a time of the engine clock whose ``now`` is ``wall_now``."""
    return time.strftime("%H:%M", time.localtime(wall_now - (now - when)))


def host_state(host: HostView, now: float, wall_now: float, *, short: bool = True) -> str:
    """A host's state in words, e.g. ``stale since 14:02 · last seen 12m ago`` or
    ``unreachable · auth refused`` (``short``: the reason cut for a header line)."""
    reason = one_line(host.reason, SHORT_REASON if short else 2000) if host.reason else ""
    if host.state is HostState.LIVE:
        return "live"
    if host.state is HostState.CONNECTING:
        return "connecting…"
    if host.state is HostState.STALE:
        words = f"stale since {time_of_day(host.since, now, wall_now)}"
        if host.last_seen is not None:
            words += f" · last seen {compact_duration(now - host.last_seen)} ago"
        return words + (f" · {reason}" if reason and not short else "")
    words = "unreachable" if host.state is HostState.UNREACHABLE else "other version"
    return f"{words} · {reason}" if reason else words


def host_problem(host: HostView, now: float, wall_now: float) -> str:
    """Why a verb on one of this host's sessions cannot go through now (said instead of waiting)."""
    return f"{host.label} is {host_state(host, now, wall_now, short=False)}; its sessions are shown as last seen."


@dataclass(frozen=True)
class HostHeader:
    """A host's header row in the sidebar (equal entries draw the same)."""

    host: str
    """The host's name ("" this machine)."""
    state: HostState
    title: str
    """``devbox · 4 sessions``."""
    status_text: str
    """``live · 1 busy · 1 needs you``, ``stale since 14:02 · last seen 12m ago``…"""
    tooltip: str

    @property
    def icon(self) -> str:
        return HOST_ICONS[self.state]

    @classmethod
    def of(cls, host: HostView, views: Sequence[SessionView], needy: int, now: float, wall_now: float) -> HostHeader:
        """The header of ``host`` over its ``views`` (``needy`` of them need the user)."""
        title = f"{one_line(host.label, 60)} · {plural(len(views), 'session')}"
        where = host.target or "this machine"
        if host.live:
            busy = sum(1 for view in views if view.status.busy)
            parts = ["this machine" if host.name == LOCAL else "live"]
            parts += [f"{busy} busy"] if busy else []
            parts += [f"{needy} need{'s' if needy == 1 else ''} you"] if needy else []
            return cls(host.name, host.state, title, " · ".join(parts), f"{host.label} · {where}")
        tooltip = f"{host.label} · {where} · {host_state(host, now, wall_now, short=False)}"
        if host.retry_at is not None and host.retry_at > now:
            tooltip += f" · tried again in {compact_duration(host.retry_at - now)}"
        return cls(host.name, host.state, title, host_state(host, now, wall_now), tooltip)


def machines(hosts: Sequence[HostView]) -> str:
    """The fleet in a few words for the title: ``3 machines``, ``3 machines, 1 not answering``."""
    down = sum(1 for host in hosts if host.state not in (HostState.LIVE, HostState.CONNECTING))
    return plural(len(hosts), "machine") + (f", {down} not answering" if down else "")
