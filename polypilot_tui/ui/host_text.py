"""Pure text for the machines of a fleet: a host's header row in the sidebar, its state in words.

Like ui/formatting.py, every function takes the times it needs (``now`` of the engine clock,
and ``wall_now`` for a time of day), so the same host and the same times give the same words.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from polypilot_tui.domain.dataclass_on_use import dataclass
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


def time_of_day(when: float, now: float, wall_now: float) -> str:
    """``HH:MM`` (local time) of ``when``, a time of the engine clock whose ``now`` is ``wall_now``."""
    return time.strftime("%H:%M", time.localtime(wall_now - (now - when)))


def host_state(host: HostView, now: float, wall_now: float) -> str:
    """A host's state in a few words: ``live``, ``stale since 14:02``, ``unreachable``…"""
    if host.state is HostState.STALE:
        return f"stale since {time_of_day(host.since, now, wall_now)}"
    return {
        HostState.LIVE: "live",
        HostState.CONNECTING: "connecting…",
        HostState.UNREACHABLE: "unreachable",
        HostState.OTHER_VERSION: "other version",
    }[host.state]


def host_detail(host: HostView, now: float) -> str:
    """What else there is to know of a host that is not live: when it last answered, and why
    not now (in full: the header cuts it, the tooltip and F2 do not)."""
    parts = [f"last seen {compact_duration(now - host.last_seen)} ago"] if host.last_seen is not None else []
    return " · ".join(parts + ([one_line(host.reason, 2000)] if host.reason else []))


def host_problem(host: HostView, now: float, wall_now: float) -> str:
    """Why a verb on one of this host's sessions cannot go through now (said instead of waiting)."""
    detail = host_detail(host, now)
    return (
        f"{host.label} is {host_state(host, now, wall_now)}"
        + (f" ({detail})" if detail else "")
        + ": nothing was sent; its sessions are shown as last seen."
    )


@dataclass(frozen=True)
class HostHeader:
    """A host's header row in the sidebar (equal entries draw the same)."""

    host: str
    """The host's name ("" this machine)."""
    state: HostState
    title: str
    """``devbox · live``, ``gpu · stale since 14:02``…"""
    status_text: str
    """``4 sessions · 1 busy · 1 needs you``, ``1 session · last seen 12m ago · <why>``…"""
    tooltip: str

    @property
    def icon(self) -> str:
        return HOST_ICONS[self.state]

    @classmethod
    def of(cls, host: HostView, views: Sequence[SessionView], needy: int, now: float, wall_now: float) -> HostHeader:
        """The header of ``host`` over its ``views`` (``needy`` of them need the user): its name
        and state, then its sessions (and when it was last seen, and why it does not answer)."""
        where = host.target or "this machine"
        state = "this machine" if host.name == LOCAL and host.live else host_state(host, now, wall_now)
        title = f"{one_line(host.label, 60)} · {state}"
        count = [plural(len(views), "session")] if views or host.live else []
        if host.live:
            busy = sum(1 for view in views if view.status.busy)
            count += [f"{needy} need{'s' if needy == 1 else ''} you"] if needy else []  # first: cut last
            count += [f"{busy} busy"] if busy else []
            return cls(host.name, host.state, title, " · ".join(count), f"{host.label} · {where}")
        detail = host_detail(host, now)
        tooltip = f"{host.label} · {where} · {state}" + (f" · {detail}" if detail else "")
        if host.retry_at is not None and host.retry_at > now:
            tooltip += f" · tried again in {compact_duration(host.retry_at - now)}"
        return cls(host.name, host.state, title, " · ".join(count + ([detail] if detail else [])), tooltip)


def machines(hosts: Sequence[HostView]) -> str:
    """The fleet in a few words for the title: ``3 machines``, ``3 machines, 1 not answering``."""
    down = sum(1 for host in hosts if host.state not in (HostState.LIVE, HostState.CONNECTING))
    return plural(len(hosts), "machine") + (f", {down} not answering" if down else "")
