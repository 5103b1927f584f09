"""An agent that floods its stdout does not hold the engine's loop: its buffered lines are read a
slice of the loop at a time, everything else that is ready running between two slices."""

from __future__ import annotations

import asyncio
import socket

from polypilot_tui.agents.acp.process import STDOUT_LIMIT
from polypilot_tui.agents.acp.transport import StdioTransport
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.infra.timeslice import SLICE

UPDATES = 20_000


def update(seq: int) -> str:
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"flood {seq} "}}
    return dump_json({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": chunk}})


async def test_buffered_lines_are_read_a_slice_at_a_time_while_the_loop_serves_the_others() -> None:
    """20,000 updates already buffered (an agent far ahead of the engine): another task gets the
    loop every slice while they are read (it got it only after the last one: ~0.3 s held)."""
    ours, theirs = socket.socketpair()
    try:
        _, writer = await asyncio.open_connection(sock=ours)
        reader = asyncio.StreamReader(limit=STDOUT_LIMIT)
        reader.feed_data("".join(update(i) + "\n" for i in range(UPDATES)).encode())
        reader.feed_eof()
        transport = StdioTransport(reader, writer)
        turns = 0

        async def other() -> None:  # anything else on the loop: a request, another session
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        await asyncio.sleep(0)
        seen, run, longest, since = 0, 0, 0, turns
        loop = asyncio.get_running_loop()
        started = loop.time()
        while (message := await transport.receive()) is not None:
            assert message["params"]["update"]["content"]["text"] == f"flood {seen} "
            seen += 1
            if turns != since:  # the others ran since the last update: a new run of updates
                since, longest, run = turns, max(longest, run), 0
            run += 1
        longest = max(longest, run)
        took = loop.time() - started
        task.cancel()
        writer.close()
    finally:
        theirs.close()
    assert seen == UPDATES
    slices = took / SLICE
    assert turns >= min(20, slices / 4), f"the loop was given to others {turns} times in {took:.3f} s"
    assert longest < UPDATES / 10, f"{longest} updates were read without letting the loop go"
