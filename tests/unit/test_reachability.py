"""One connect tells a model server that is down from one that answers (real sockets, 127.0.0.1)."""

from __future__ import annotations

import socket

from polypilot_tui.agents.reachability import down_because


async def test_a_closed_port_is_refused_and_an_open_one_answers() -> None:
    with socket.socket() as bound:  # bound, not listening: the kernel refuses connections
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        assert await down_because(f"http://127.0.0.1:{port}/v1") == "connection refused"
        bound.listen()
        assert await down_because(f"http://127.0.0.1:{port}/v1") is None


async def test_a_host_with_no_address_is_down_and_an_unclear_answer_is_not() -> None:
    assert await down_because("http://no-such-host.invalid:8000/v1") == "host no-such-host.invalid not found"
    assert await down_because("http://127.0.0.1:port/v1") is None  # not a URL to judge
    assert await down_because("not a url") is None
