"""A streaming reply (domain/gathered.py) read whole after every piece, as every attached client
reads it once per view it is sent: correct at each read, and in linear time (a re-join of every
piece at every read made a 100,000-delta reply quadratic: 20,000 pieces took 2.2 s, 100,000
about a minute)."""

from __future__ import annotations

import time

from polypilot_tui.domain.gathered import Gathered


def test_it_reads_whole_after_each_piece_and_says_when_it_moved() -> None:
    reply = Gathered(limit=20)
    assert not reply and reply.text() == "" and reply.changes == 0
    expected = ""
    for word in ("Hello", ", ", "world"):
        reply.add(word)
        expected += word
        assert reply.text() == expected and reply.text() == expected
    seen = reply.changes
    reply.add("!" * 10)  # past the limit: 8 kept, 2 counted
    assert reply.text() == "Hello, world!!!!!!!!" and reply.dropped == 2 and reply.changes == seen + 1
    assert reply.take().startswith("Hello, world!!!!!!!!") and not reply and reply.text() == ""
    assert reply.changes == seen + 2
    reply.add("again")
    assert reply.text() == "again"


def test_reading_after_each_of_100_000_pieces_is_linear() -> None:
    reply = Gathered(limit=10_000_000)
    started = time.perf_counter()
    for i in range(100_000):
        reply.add(f"w{i % 10} ")
        assert len(reply.text()) == 3 * (i + 1)
    took = time.perf_counter() - started
    assert took < 5.0, f"{took:.1f} s for 100,000 pieces read after each (a re-join of all was minutes)"
