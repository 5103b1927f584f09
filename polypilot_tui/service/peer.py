"""Who is at the other end of a Unix socket: the engine and its clients talk to their own user only.

A socket's file mode says who may connect, not who listens, and the folder it is in may not
have been ours when it was bound: so both ends ask the kernel (``SO_PEERCRED``, Linux) which
user the process at the other end runs as, the client before it sends a byte, the engine
before it reads one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
from typing import Any, NamedTuple

from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.infra.private import user_name

log = logging.getLogger(__name__)

_CREDENTIALS = struct.Struct("3i")
REFUSAL_TEXT = "this engine serves only the user it runs as"
_BODY = dump_json({"error": REFUSAL_TEXT}).encode()
REFUSAL = (
    b"HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\nconnection: close\r\n"
    + f"content-length: {len(_BODY)}\r\n\r\n".encode()
    + _BODY
)
"""What a client of another user reads before the engine closes its connection."""


class Peer(NamedTuple):
    """The process at the other end of a Unix socket, as the kernel saw it connect or listen."""

    pid: int
    uid: int

    def describe(self) -> str:
        return f"pid {self.pid}, user {user_name(self.uid)}"


def peer_of(sock: Any) -> Peer:
    """The peer of a connected Unix socket (a socket or asyncio's TransportSocket)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
    pid, uid, _gid = _CREDENTIALS.unpack(raw)
    return Peer(pid, uid)


def foreign_peer(sock: Any) -> Peer | None:
    """The peer when it runs as another user than this process (None: it is ours)."""
    peer = peer_of(sock)
    return None if peer.uid == os.geteuid() else peer


def own_user_only(protocol: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """``protocol`` (uvicorn's HTTP protocol), closing every connection of another user at once:
    it gets :data:`REFUSAL` and nothing it sent is read."""

    class OwnUserOnly(protocol):  # type: ignore[misc,valid-type]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            try:
                other = foreign_peer(transport.get_extra_info("socket"))
                who = other.describe() if other is not None else ""
            except (OSError, AttributeError) as exc:  # cannot tell who it is: not served either
                who = f"unknown: {exc}"
            if who:
                log.warning("refused a connection from another user (%s)", who)
                if isinstance(transport, asyncio.WriteTransport):
                    transport.write(REFUSAL)
                transport.close()  # stops reading now: no request of theirs reaches the app

    OwnUserOnly.__name__ = OwnUserOnly.__qualname__ = f"OwnUserOnly{protocol.__name__}"
    return OwnUserOnly
