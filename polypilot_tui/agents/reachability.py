"""Is anything listening at a model server's address? One TCP connect, bounded.

Agents retry a model server they cannot reach (the Copilot CLI five times over ~23 s, with
backoff) before they say so. When an agent reports its first failed connection, one connect
of ours tells a server that is down (the port refuses, the host has no address) from one that
failed once: the first ends the turn at once, named; the second is left to the agent's retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from urllib.parse import urlsplit

CONNECT_TIMEOUT = 2.0
"""A connect that neither succeeds nor fails within this is no answer (a firewall that drops)."""


async def down_because(url: str, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """Why nothing can be reached at ``url`` ("connection refused", "host not found"), or None
    when it accepts a connection — or when the connect gives no clear answer in time."""
    parts = urlsplit(url)
    host = parts.hostname
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not host:
        return None
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror:
        return f"host {host} not found"
    except (TimeoutError, OSError):
        return None  # unreachable network, a dropped SYN: no clear answer, the agent may retry
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None
