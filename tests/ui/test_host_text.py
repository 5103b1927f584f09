"""A host's header and state in words (pure: the same host and times give the same words)."""

from __future__ import annotations

import pytest

from polypilot_tui.domain.hosts import HostState, HostView
from polypilot_tui.ui.host_text import HostHeader, host_problem, machines
from tests.snapshots.fleet_scenarios import utc  # noqa: F401 - the fixture

WALL = 1_767_225_600.0  # 2026-01-01 00:00 UTC, at now = 1000
NOW = 1000.0
pytestmark = pytest.mark.usefixtures("utc")  # fleet_scenarios.utc: times of day in UTC


def host(state: HostState, **fields: object) -> HostView:
    return HostView("gpu", "dev@gpu.example:22", state, since=fields.pop("since", NOW - 600), **fields)  # type: ignore[arg-type]


def test_a_stale_host_says_since_when_and_when_it_was_last_seen() -> None:
    header = HostHeader.of(host(HostState.STALE, last_seen=NOW - 605, reason="Connection reset"), (), 0, NOW, WALL)
    assert header.title == "gpu · stale since 23:50"
    assert header.status_text == "last seen 10m ago · Connection reset"


def test_an_unreachable_host_says_why_in_full_where_there_is_room() -> None:
    reason = (
        "polypilot is not installed there: `pipx install polypilot_tui` on that host — "
        "bash: polypilot: command not found"
    )
    view = host(HostState.UNREACHABLE, reason=reason, retry_at=NOW + 30)
    header = HostHeader.of(view, (), 0, NOW, WALL)
    assert header.title == "gpu · unreachable" and header.status_text == reason  # the row cuts it, drawn
    assert header.tooltip.endswith(f"{reason} · tried again in 30s")
    said = host_problem(view, NOW, WALL)
    assert said.startswith("gpu is unreachable (polypilot is not installed there") and "nothing was sent" in said


def test_local_and_live_hosts_count_their_sessions() -> None:
    local = HostView("", "", HostState.LIVE, since=0.0)
    assert HostHeader.of(local, (), 0, NOW, WALL).title == "Local · this machine"
    assert HostHeader.of(local, (), 0, NOW, WALL).status_text == "0 sessions"
    other = HostHeader.of(host(HostState.OTHER_VERSION, reason="its engine speaks API v2"), (), 0, NOW, WALL)
    assert (other.title, other.status_text) == ("gpu · other version", "its engine speaks API v2")


def test_the_title_counts_machines_not_answering_but_not_those_connecting() -> None:
    hosts = [HostView("", "", HostState.LIVE, 0.0), host(HostState.CONNECTING), host(HostState.STALE)]
    assert machines(hosts) == "3 machines, 1 not answering"
    assert machines(hosts[:2]) == "2 machines"
