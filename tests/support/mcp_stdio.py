"""A stdio MCP server driven as an agent drives it: newline-delimited JSON-RPC on its stdin and
stdout, started from a :class:`~polypilot_tui.domain.tool_servers.ToolServer` (its env added
to this process's), every answer awaited with a bound, and the process stopped by the test."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from polypilot_tui.domain.tool_servers import ToolServer

ANSWER_WAIT = 30.0


class McpStdio:
    """One running stdio MCP server and the JSON-RPC it speaks."""

    def __init__(self, process: asyncio.subprocess.Process, started: float) -> None:
        self.process = process
        self.started = started
        self.initialized_after: float | None = None
        """Seconds from the spawn to the answer to ``initialize``."""
        self._ids = itertools.count(1)

    async def request(self, method: str, params: dict[str, Any] | None = None, wait: float = ANSWER_WAIT) -> Any:
        """The ``result`` of a request (AssertionError on a JSON-RPC error or no answer in time)."""
        rid = next(self._ids)
        await self._write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        while True:
            message = await asyncio.wait_for(self._read(), wait)
            if message.get("id") == rid:
                assert "error" not in message, message
                return message["result"]

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._write({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    async def initialize(self) -> Any:
        result = await self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
        )
        self.initialized_after = time.monotonic() - self.started
        await self.notify("notifications/initialized")
        return result

    async def tools(self) -> list[dict[str, Any]]:
        return list((await self.request("tools/list"))["tools"])

    async def call(self, tool: str, wait: float = ANSWER_WAIT, **arguments: Any) -> tuple[bool, str]:
        """(is it an error, its text) of a tool call."""
        result = await self.request("tools/call", {"name": tool, "arguments": arguments}, wait)
        text = "".join(part.get("text", "") for part in result.get("content", []))
        return bool(result.get("isError")), text

    async def _write(self, message: dict[str, Any]) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write((json.dumps(message) + "\n").encode())
        await stdin.drain()

    async def _read(self) -> dict[str, Any]:
        stdout = self.process.stdout
        assert stdout is not None
        line = await stdout.readline()
        assert line, "the server closed its stdout"
        message = json.loads(line)
        assert isinstance(message, dict)
        return message


@asynccontextmanager
async def started(
    server: ToolServer, env: dict[str, str] | None = None, cwd: Path | None = None
) -> AsyncIterator[McpStdio]:
    """``server`` running as an agent starts it, in ``cwd`` (``env`` replaces this process's environment)."""
    base = dict(os.environ if env is None else env)
    began = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        server.command,
        *server.args,
        env={**base, **dict(server.env)},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
    )
    try:
        yield McpStdio(process, began)
    finally:
        if process.returncode is None:
            assert process.stdin is not None
            process.stdin.close()  # a stdio server ends at the end of its input
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
