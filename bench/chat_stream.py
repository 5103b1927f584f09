"""A reply streaming into the chat: CPU per delta (stream() plus the frame) as the reply grows.

A markdown reply (headings, lists, tables, code blocks, ~40 characters per delta) streams
on top of 10 KB and of 100 KB already received; the ratio of the two medians says whether
a delta costs what the reply's length costs (about 10x) or what its last block costs
(about 1x). A lone paragraph of 24 KB is also timed: there the last block *is* the reply.
CPU time (``process_time``) is reported because wall time on a shared machine is noise.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll

from bench._support import Row
from polypilot_tui.ui.widgets.assistant_message import AssistantMessage

DELTAS = 100
UNIT = (
    "## Step {i}\n\nSome **bold** text with `code`, List<String> and a [link](http://x/{i}).\n"
    "A second line of the paragraph.\n\n- item one\n- item two\n  1. nested\n\n"
    "| a | b |\n|---|---|\n| {i} | <b>two</b> a longer cell |\n\n> quote {i}\n\n"
)
CODE = "```python\ndef f_{i}(x):\n    return x * {i}\n```\n\n"
MORE = "and the reply goes on with one more sentence about List<String> " * 80


def reply(size: int) -> str:
    parts: list[str] = []
    i = 0
    while sum(map(len, parts)) < size:
        parts.append(UNIT.format(i=i) + (CODE.format(i=i) if i % 25 == 0 else ""))
        i += 1
    return "".join(parts)


class OneReply(App[None]):
    def __init__(self, message: AssistantMessage) -> None:
        super().__init__()
        self.message = message

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield self.message


async def per_delta(base: str, more: str) -> float:
    """Median CPU seconds of one delta, streaming ``more`` onto ``base``."""
    message = AssistantMessage(base)
    app = OneReply(message)
    times: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for n in range(1, DELTAS + 1):
            started = time.process_time()
            message.stream(base + more[: 40 * n])
            message.parent.scroll_end(animate=False)  # type: ignore[union-attr]
            await pilot.pause()
            times.append(time.process_time() - started)
    return statistics.median(times)


async def run() -> list[Row]:
    small = await per_delta(reply(10_000), MORE)
    big = await per_delta(reply(100_000), MORE)
    lone = await per_delta("lorem ipsum " * 2000, "lorem ipsum " * 400)
    print(f"delta on a 10 KB reply:        median {small * 1000:.1f} ms CPU")
    print(f"delta on a 100 KB reply:       median {big * 1000:.1f} ms CPU")
    print(f"delta on a 24 KB paragraph:    median {lone * 1000:.1f} ms CPU (its last block is all of it)")
    print(f"ratio 100 KB / 10 KB:          {big / small:.2f}x (10x would mean the whole reply is redrawn)")
    figure = f"{big * 1000:.1f} ms vs {small * 1000:.1f} ms CPU: {big / small:.2f}x"
    return [("a streamed delta on a 100 KB reply vs a 10 KB one", figure, "well under 10x")]


def main() -> list[Row]:
    return asyncio.run(run())


if __name__ == "__main__":
    main()
