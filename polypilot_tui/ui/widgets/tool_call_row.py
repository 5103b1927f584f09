"""One tool call, updated in place as it runs, completes or fails."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from polypilot_tui.core.session import ChatItem
from polypilot_tui.core.text import one_line
from polypilot_tui.ui.formatting import safe_text

TOOL_ICONS = {"running": "◐", "completed": "✓", "failed": "✕", "interrupted": "⊘"}
PREVIEW_LINES = 4
"""Lines of tool output shown under the call."""


def _clip(line: str, limit: int = 200) -> str:
    line = line.expandtabs(4).rstrip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def tool_content(item: ChatItem) -> Content:
    """Icon, tool name, argument summary, then a short output preview (all plain text)."""
    status = item.tool_status or "running"
    parts: list[Content | str | tuple[str, str]] = [
        (TOOL_ICONS.get(status, "•"), "bold"), " ", (one_line(item.tool_name, 40), "bold"),
    ]
    if item.tool_detail:
        parts += ["  ", (one_line(item.tool_detail, 200), "italic")]
    if status != "completed":
        parts += ["  ", (status, "dim")]
    lines = safe_text(item.text).strip("\n").split("\n") if item.text.strip() else []
    if lines:
        more = len(lines) - PREVIEW_LINES
        preview = "\n".join(_clip(line) for line in lines[:PREVIEW_LINES])
        if more > 0:
            preview += f"\n… {more} more line{'s' if more != 1 else ''}"
        parts += ["\n", (preview, "dim")]
    return Content.assemble(*parts)


class ToolCallRow(Static):
    """A tool row: its status shows as an icon and a ``-<status>`` CSS class."""

    def __init__(self, item: ChatItem) -> None:
        super().__init__(tool_content(item), classes="chat-item")
        self._status = ""
        self._apply_status(item.tool_status or "running")

    def _apply_status(self, status: str) -> None:
        if status != self._status:
            if self._status:
                self.remove_class(f"-{self._status}")
            self.add_class(f"-{status}")
            self._status = status

    def show(self, item: ChatItem) -> None:
        """Redraw with a newer version of the item."""
        self._apply_status(item.tool_status or "running")
        self.update(tool_content(item))
