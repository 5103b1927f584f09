"""Hosts of a fleet (domain/hosts.py): names and targets checked strictly, health on a FakeClock."""

from __future__ import annotations

import pytest

from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.hosts import (
    INSTALL_COMMAND,
    UPGRADE_COMMAND,
    Backoff,
    HostEntry,
    HostError,
    HostHealth,
    HostState,
    HostTarget,
    check_name,
    classify_failure,
    entries_from_json,
    other_version_reason,
    parse_target,
)


@pytest.mark.parametrize(
    ("text", "target", "shown"),
    [
        ("build", HostTarget("build"), "build"),
        ("dev@build.example.com", HostTarget("build.example.com", "dev"), "dev@build.example.com"),
        ("dev@10.0.0.7:2222", HostTarget("10.0.0.7", "dev", 2222), "dev@10.0.0.7:2222"),
        ("[::1]:22", HostTarget("::1", "", 22), "[::1]:22"),
        ("a.b-c.d.", HostTarget("a.b-c.d."), "a.b-c.d."),
        ("my_box", HostTarget("my_box"), "my_box"),  # an ssh config alias (README: aliases work)
        ("dev@_build_.lan:2222", HostTarget("_build_.lan", "dev", 2222), "dev@_build_.lan:2222"),
    ],
)
def test_a_target_is_a_user_a_host_and_a_port(text: str, target: HostTarget, shown: str) -> None:
    assert parse_target(text) == target
    assert str(parse_target(text)) == shown
    assert not target.destination.startswith("-")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "-oProxyCommand=touch /tmp/x",  # an ssh option
        "dev@-oProxyCommand=x",
        "-dev@host",  # a user that reads as an option
        "host -p 22",
        "host\nother",
        "dev@host:0",
        "dev@host:65536",
        "dev@host:22:33",
        "host_-",  # no label ends with '-'
        "my_box -oX",
        "-host",
        "a..b",
        "[not-ipv6]:22",
        "999.1.1.1",
        "user@@host",
        "us er@host",
        ".dev@host",
        "x" * 301,
    ],
)
def test_anything_else_is_refused_saying_what_fits(text: str) -> None:
    with pytest.raises(HostError, match="host|user|port|IPv6"):
        parse_target(text)


@pytest.mark.parametrize("name", ["", "Dev", "-dev", "dev box", "d" * 33, "local", "all", "dév", "a/b"])
def test_a_host_name_is_short_lower_case_and_not_reserved(name: str) -> None:
    with pytest.raises(HostError):
        check_name(name)
    assert check_name("build-2_x") == "build-2_x"


def test_entries_round_trip_and_refuse_twins_options_and_bad_commands() -> None:
    entry = HostEntry.checked("dev", "me@dev.example:2200", "~/bin/polypilot", ("-F", "/home/me/.ssh/fleet"))
    assert entries_from_json({"hosts": [entry.to_json()]}) == [entry]
    with pytest.raises(HostError, match="twice"):
        entries_from_json({"hosts": [entry.to_json(), entry.to_json()]})
    for options in (("ProxyCommand=x",), ("-F", "a", "b"), ("-vF", "x"), ("-F", "a\nb")):
        with pytest.raises(HostError, match="ssh option"):
            HostEntry.checked("dev", "dev", ssh_options=options)
    with pytest.raises(HostError, match="one line"):
        HostEntry.checked("dev", "dev", remote_command="polypilot\nrm -rf ~")
    with pytest.raises(HostError, match="expected"):
        entries_from_json([])


def test_backoff_doubles_from_the_first_to_the_cap() -> None:
    policy = Backoff(first=1.0, factor=2.0, cap=30.0)
    assert [policy.delay(n) for n in range(8)] == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert policy.delay(10_000) == 30.0


async def test_health_goes_connecting_live_stale_and_retries_with_backoff_on_its_clock() -> None:
    clock = FakeClock()
    health = HostHealth("dev", "dev:22", clock)
    assert health.view.state is HostState.CONNECTING and health.view.last_seen is None
    await clock.advance(2.0)
    failed = health.failed("ssh: connect to host dev port 22: Connection refused")
    assert failed.state is HostState.UNREACHABLE and failed.since == 2.0 and failed.retry_at == 3.0
    assert health.wait() == 1.0
    await clock.advance(1.0)
    assert health.connecting().state is HostState.UNREACHABLE  # its reason stays shown while tried
    assert health.failed("again").retry_at == 3.0 + 2.0  # the second failure waits twice as long
    await clock.advance(5.0)
    live = health.live()
    assert live.state is HostState.LIVE and live.since == 8.0 and live.last_seen == 8.0 and live.reason == ""
    await clock.advance(4.0)
    lost = health.lost("the ssh connection ended")
    assert lost.state is HostState.STALE and lost.since == 12.0 and lost.last_seen == 8.0 and health.wait() == 0
    # A host seen before stays stale (rows as last seen) while its tries fail; the backoff restarts.
    assert health.failed("Connection refused").state is HostState.STALE
    assert health.view.retry_at == 13.0 and health.view.since == 12.0


def test_another_api_version_is_retried_rarely() -> None:
    clock = FakeClock()
    health = HostHealth("old", "old", clock)
    view = health.failed(other_version_reason(2, 1), HostState.OTHER_VERSION)
    assert view.state is HostState.OTHER_VERSION and view.retry_at == 30.0
    assert "API v2, this dashboard v1" in view.reason and UPGRADE_COMMAND in view.reason


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("cannot reach dev over ssh: me@127.0.0.1: Permission denied (publickey).", "auth refused: "),
        ("dev: the remote command was not found (exit 127): bash: polypilot: command not found", INSTALL_COMMAND),
        ("cannot reach dev over ssh: ssh: connect to host 127.0.0.1 port 1: Connection refused", "Connection refused"),
    ],
)
def test_a_failure_is_told_in_words_that_say_what_to_do(said: str, expected: str) -> None:
    state, reason = classify_failure(said)
    assert state is HostState.UNREACHABLE and expected in reason
