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

from polypilot_tui.domain.safe_json import ParseError, load_json
from polypilot_tui.domain.text import one_line

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

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8", "replace")
        async with self._send_lock:  # one message at a time: lines never interleave
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                return None  # EOF: the agent closed stdout
            line = line.strip()
            if not line:
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                text = line.decode("utf-8", "replace")
                self.replaced_lines += 1
                self._warn("utf8", "the agent sent invalid UTF-8; it is shown with replacement characters")
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
        with contextlib.suppress(Exception):
            if not self._writer.is_closing():
                self._writer.close()
            await asyncio.wait_for(self._writer.wait_closed(), 1.0)

    async def _read_line(self) -> bytes:
        chunks: list[bytes] = []
        try:
            while True:
                try:
                    chunks.append(await self._reader.readuntil(b"\n"))
                    return b"".join(chunks)
                except asyncio.LimitOverrunError as exc:  # a long line: take it in pieces
                    chunks.append(await self._reader.readexactly(exc.consumed))
        except asyncio.IncompleteReadError as exc:
            chunks.append(exc.partial)
            return b"".join(chunks)

    def _warn(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s", message)
