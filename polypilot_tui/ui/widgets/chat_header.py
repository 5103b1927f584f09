"""One line naming the session on screen: name, its sandbox (in the success colour), an
orchestrator's bound reached or stall (in the warning colour), the machine it runs on (with
several), agent, model, title, usage, folder."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.view import SessionView
from polypilot_tui.ui.formatting import sandbox_mark
from polypilot_tui.ui.usage_text import usage_summary


class ChatHeader(Static):
    """The selected session's identity (plain text, never markup)."""

    DEFAULT_CSS = """
    ChatHeader {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self._text: tuple[str, str, str] = ("", "", "")

    def show(self, view: SessionView | None, host: str = "") -> None:
        """Redraw for ``view`` (``host``: the machine it runs on, when not this one)."""
        note = sandbox = ""
        if view is None:
            text = "No session — press ctrl+n to start one"
        else:
            note = one_line(view.team_note, 160)
            if view.sandbox.on:
                sandbox = f"{sandbox_mark(view.sandbox)} {view.sandbox.label()}"
            parts = [one_line(view.name, 40)] + ([f"on {host}"] if host else []) + [view.agent]
            if view.model:
                parts.append(one_line(view.model, 30))
            if view.title:
                parts.append(one_line(view.title, 60))
            usage = usage_summary(view.usage)
            if usage:  # before the folder: what the session spent matters more than where
                parts.append(usage)
            if view.cwd:
                parts.append(one_line(view.cwd, 60))
            text = " · ".join(parts)
        if (text, note, sandbox) == self._text:
            return
        self._text = (text, note, sandbox)
        if not note and not sandbox:
            self.update(text)
            return
        # Right after the name: the line is cut at the pane's width, and these matter most.
        name, _, rest = text.partition(" · ")
        pieces: list[str | tuple[str, str]] = [name]
        if sandbox:
            pieces += [" · ", (sandbox, "bold $success")]
        if note:
            pieces += [" · ", (f"⚠ {note}", "bold $text-warning")]
        self.update(Content.assemble(*pieces, " · ", rest))
