"""Shown while a session's tools keep failing with permission errors."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Static

BANNER_TEXT = (
    "⚠ Tools are failing with permission errors — the agent may have lost its "
    "permission handler. Reconnecting restores it."
)


class PermissionBanner(Horizontal):
    """A warning with a Reconnect button (runs the main screen's reconnect action)."""

    DEFAULT_CSS = """
    PermissionBanner {
        height: auto;
        padding: 0 1;
        background: $permission-warning 15%;
        border-left: thick $permission-warning;
    }
    PermissionBanner .banner-text {
        width: 1fr;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.display = False

    def compose(self) -> ComposeResult:
        yield Static(BANNER_TEXT, classes="banner-text", markup=False)

    async def show(self, warning: bool) -> None:
        """Visible exactly while the session has the permission warning. Its button is mounted
        with the first warning: hidden, a button still cost the dashboard's first frame ~2 ms
        of styling, and most sessions never show it."""
        if warning and not self.query(Button):
            await self.mount(Button("Reconnect", id="banner-reconnect", action="screen.reconnect", compact=True))
        self.display = warning
