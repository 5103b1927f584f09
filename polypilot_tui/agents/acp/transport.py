"""JSON-RPC lines over an agent's stdin/stdout, tolerant of what agents really send.

The SDK's own stdio transport parses each line with ``json.loads(bytes)``: one invalid
UTF-8 byte in an update (a tool printing binary output) and the whole message is dropped
with a traceback. Here a line is decoded with replacement characters, so the update
arrives and its text is shown (with U+FFFD where the bytes were bad); a line that is not
JSON at all is logged once per kind and skipped. Nesting and numbers are bounded like
every other JSON the app reads. It implements the SDK's message-level ``Transport``
protocol (``send``, ``receive``, ``close``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from typing import Any

from polypilot_tui.domain.limits import AGENT_LINE_BYTES
from polypilot_tui.domain.safe_json import ParseError, load_json
from polypilot_tui.domain.text import one_line
from polypilot_tui.infra.timeslice import TimeSlice

log = logging.getLogger(__name__)

MAX_DEPTH = 128
"""JSON-RPC envelopes are ~6 deep; tool arguments from a model may nest more."""
REPLACEMENT = "\ufffd"
MAX_STRAY_LINES = 5
MAX_STRAY_CHARS = 200


class StdioTransport:
    """Newline-delimited JSON-RPC messages over an agent process's pipes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._send_lock = asyncio.Lock()
        self._warned: set[str] = set()
        self.stray: deque[str] = deque(maxlen=MAX_STRAY_LINES)
        """The last lines the agent wrote on stdout that are not JSON-RPC (control stripped,
        cut): an agent that does not speak ACP says so here, not in our log only."""
        self.replaced_lines = 0
        """Lines that held invalid UTF-8 (decoded with replacement characters)."""
        self.dropped_lines = 0
        """Lines longer than limits.AGENT_LINE_BYTES (dropped, each said in ``stray`` and the log)."""
        self._slice = TimeSlice()
        """A flooding agent's lines are read a slice at a time, the loop serving the others
        between (and, when the engine falls behind, its pipe fills and the agent waits)."""

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8", "replace")
        async with self._send_lock:  # one message at a time: lines never interleave
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            await self._slice.share()
            text = await self._read_text()
            if text is None:
                return None  # EOF: the agent closed stdout
            if not text or text.isspace():
                continue
            try:
                message = load_json(text, "agent message", max_depth=MAX_DEPTH)
            except ParseError as exc:
                self.stray.append(one_line(text, MAX_STRAY_CHARS))
                self._warn(f"json:{exc.reason[:40]}", f"skipped a line from the agent that is not JSON-RPC: {exc}")
                continue
            if isinstance(message, dict):
                return message
            self._warn("shape", "skipped a JSON line from the agent that is not a JSON-RPC message")

    async def close(self) -> None:
        with contextlib.suppress(OSError, TimeoutError):  # a pipe the agent closed, or a hang
            if not self._writer.is_closing():
                self._writer.close()
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)

    async def _read_text(self) -> str | None:
        """The next line as text (None at EOF; "" for a line too long to keep, which is
        dropped and said). Read without copies beyond the bytes and their text: a line of
        megabytes (a tool's output) must not cost many times its size."""
        line = await self._read_line()
        if line is None:
            return None
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError:
            self.replaced_lines += 1
            self._warn("utf8", "the agent sent invalid UTF-8; it is shown with replacement characters")
            return line.decode("utf-8", "replace")

    async def _read_line(self) -> bytes | bytearray | None:
        reader = self._reader
        try:
            line: bytes | bytearray = await reader.readuntil(b"\n")
            return line
        except asyncio.IncompleteReadError as exc:
            return exc.partial or None
        except asyncio.LimitOverrunError as exc:  # a long line: gathered in one buffer
            buffer = bytearray(await reader.readexactly(exc.consumed))
        while True:
            try:
                buffer += await reader.readuntil(b"\n")
                return buffer
            except asyncio.IncompleteReadError as exc:
                buffer += exc.partial
                return buffer
            except asyncio.LimitOverrunError as exc:
                buffer += await reader.readexactly(exc.consumed)
            if len(buffer) > AGENT_LINE_BYTES:
                return await self._drop_line(len(buffer))

    async def _drop_line(self, size: int) -> bytes:
        """Read the rest of a line too long to keep without keeping it; say so."""
        reader = self._reader
        while True:
            try:
                size += len(await reader.readuntil(b"\n"))
                break
            except asyncio.IncompleteReadError as exc:
                size += len(exc.partial)
                break
            except asyncio.LimitOverrunError as exc:
                size += len(await reader.readexactly(exc.consumed))
        self.dropped_lines += 1
        note = f"a message of {size:,} bytes from the agent was dropped: more than {AGENT_LINE_BYTES:,} bytes"
        self.stray.append(note)
        log.warning("%s", note)
        return b""

    def _warn(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s", message)
