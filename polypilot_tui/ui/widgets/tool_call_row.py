"""One tool call, updated in place as it runs, waits for permission, completes or fails.

Folded, the row previews the first lines of the output; "show all" unfolds the whole of it,
wrapped, never cut mid-line. Output longer than :data:`EXPANDED_HEAD` + :data:`EXPANDED_TAIL`
lines shows its head and tail around a line saying how many lines are not shown (the full
text stays in the session history). Everything is plain text: never markup, never a link.
"""

from __future__ import annotations

from textual.content import Content
from textual.style import Style
from textual.widgets import Static

from polypilot_tui.domain.chat import TOOL_STATUS_WORDS, ChatItem
from polypilot_tui.domain.text import one_line
from polypilot_tui.ui.formatting import safe_text

_GLYPHS = {
    "running": "◐",
    "waiting": "?",
    "completed": "✓",
    "failed": "✕",
    "rejected": "⊗",
    "refused": "⊠",
    "interrupted": "⊘",
    "cancelled": "■",
}
TOOL_STATES: dict[str, tuple[str, str]] = {
    status: (_GLYPHS[status], word) for status, word in TOOL_STATUS_WORDS.items()
}
"""Status -> (single-cell glyph, word). "waiting" (its permission prompt is open) must not look like running."""
TOOL_ICONS = {status: icon for status, (icon, _word) in TOOL_STATES.items()}
PREVIEW_LINES = 4
"""Output lines shown while the row is folded."""
PREVIEW_CHARS = 200
"""A folded row cuts longer lines here (the unfolded row shows them whole)."""
EXPANDED_HEAD = 400
EXPANDED_TAIL = 100
"""An unfolded row shows at most this many first and last lines of the output."""
_TOGGLE = Style.from_meta({"@click": "toggle_output"})


def _more(count: int) -> str:
    return f"{count:,} more line{'' if count == 1 else 's'}"


def _clip(line: str, limit: int = PREVIEW_CHARS) -> tuple[str, bool]:
    line = line.rstrip()
    return (line, False) if len(line) <= limit else (line[: limit - 1] + "…", True)


def _output_lines(item: ChatItem) -> list[str]:
    text = safe_text(item.text).expandtabs(4)
    return text.strip("\n").split("\n") if text.strip() else []


def tool_content(item: ChatItem, expanded: bool = False) -> Content:
    """Icon, tool name, argument summary, status word, then the output (plain text)."""
    status = item.tool_status or "running"
    icon, word = TOOL_STATES.get(status, ("•", status))
    parts: list[Content | str | tuple[str, str | Style]] = [
        (icon, "bold"),
        " ",
        (one_line(item.tool_name, 40), "bold"),
    ]
    if item.tool_detail:
        parts += ["  ", (one_line(item.tool_detail, 200), "italic")]
    if status != "completed":
        parts += ["  ", (word, "dim")]
    lines = _output_lines(item)
    body, toggle = _expanded(lines) if expanded else _preview(lines)
    if body:
        parts += ["\n", (body, "dim")]
    if toggle:
        parts += ["\n", (toggle, _TOGGLE + Style.parse("underline"))]
    return Content.assemble(*parts)


def _preview(lines: list[str]) -> tuple[str, str]:
    """The first lines, clipped; and the label that unfolds the rest ("" if nothing is hidden)."""
    shown = [_clip(line) for line in lines[:PREVIEW_LINES]]
    more = len(lines) - PREVIEW_LINES
    text = "\n".join(line for line, _cut in shown)
    if more > 0:
        return text, f"▸ {_more(more)} — show all"
    return text, "▸ show whole lines" if any(cut for _line, cut in shown) else ""


def _expanded(lines: list[str]) -> tuple[str, str]:
    """Every line whole, or the head and tail with a note saying how many lines are not shown."""
    if len(lines) <= EXPANDED_HEAD + EXPANDED_TAIL:
        return "\n".join(lines), "▾ show less"
    hidden = len(lines) - EXPANDED_HEAD - EXPANDED_TAIL
    note = f"··· {_more(hidden)} not shown (lines {EXPANDED_HEAD + 1:,}–{EXPANDED_HEAD + hidden:,}) ···"
    return "\n".join([*lines[:EXPANDED_HEAD], note, *lines[-EXPANDED_TAIL:]]), "▾ show less"


class ToolCallRow(Static):
    """A tool row: its status shows as a glyph, a word and a ``-<status>`` CSS class."""

    def __init__(self, item: ChatItem) -> None:
        super().__init__(tool_content(item), classes="chat-item", markup=False)
        self._item = item
        self.expanded = False
        """Whether the whole output is unfolded (clicking "show all" / "show less")."""
        self._status = ""
        self._apply_status(item.tool_status or "running")

    def _apply_status(self, status: str) -> None:
        if status != self._status:
            if self._status:
                self.remove_class(f"-{self._status}")
            self.add_class(f"-{status}")
            self._status = status

    def show(self, item: ChatItem) -> None:
        """Redraw with a newer version of the item (folded or not, as the user left it)."""
        self._item = item
        self._apply_status(item.tool_status or "running")
        self.update(tool_content(item, self.expanded))

    def action_toggle_output(self) -> None:
        """Unfold the whole output, or fold it back to the preview."""
        self.expanded = not self.expanded
        self.update(tool_content(self._item, self.expanded))
