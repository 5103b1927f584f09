"""What the Copilot hook tests share: a stand-in for the SDK client's private JSON-RPC link."""

from __future__ import annotations

from typing import Any


class FakeRpc:
    """The SDK client's JSON-RPC connection as install_hooks reaches it (by getattr)."""

    def __init__(self, handler: Any) -> None:
        self.notification_handler = handler
        self.on_close = None

    def set_notification_handler(self, handler: Any) -> None:
        self.notification_handler = handler
