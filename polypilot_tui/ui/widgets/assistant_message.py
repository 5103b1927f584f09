"""An assistant reply; also the live view of a streaming reply.

The reply is markdown from an untrusted agent, drawn so that nothing it says is lost: HTML
is text (``List<String>``), tables wrap instead of cutting, code blocks scroll sideways
(see ``ui/markdown``). It is a column of *pieces*: :class:`ProseRun` runs of prose (each
bounded to about :data:`PROSE_CAP` characters, drawn by a :class:`ProseView` child) and one
:class:`CodeBlock` per code block. A reply of prose alone (most of them) mounts no child at
all: the message draws its one run itself, so opening a long session mounts no more widgets
than before.

Streaming stays cheap however long the reply grows: the text before the start of the last
top-level markdown block never changes meaning, so it is *frozen* (parsed once, its widgets
never touched again); each :meth:`AssistantMessage.stream` call re-parses and redraws only
the last block. (Rich's Markdown in one widget redrew the whole reply on every delta;
Textual's Markdown widget mounts a widget per block, too slow when a long session opens.)
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult, RenderResult
from textual.selection import Selection
from textual.visual import Visual
from textual.widget import Widget
from textual.widgets import Static

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.ui.formatting import safe_text
from polypilot_tui.ui.markdown.blocks import Code, Item, ProseItem, group, parse
from polypilot_tui.ui.widgets.code_block import CodeBlock
from polypilot_tui.ui.widgets.prose_view import ProseRun, ProseView

INTERRUPTED_NOTE = "(interrupted — the reply was cut short; what arrived is kept)"
PROSE_CAP = 4000
"""Characters of prose one run holds before the next top-level block starts a new one."""
LIVE_HIGHLIGHT_LINES = 200
"""A code block still streaming is syntax-coloured only up to this many lines (then when done)."""


def _line_offset(text: str, line: int) -> int:
    """Character offset where line number ``line`` of ``text`` starts."""
    position = 0
    for _ in range(line):
        position = text.index("\n", position) + 1
    return position


class AssistantMessage(Widget):
    """Markdown of untrusted agent text: control sequences stripped, never markup, no links, nothing dropped."""

    DEFAULT_CSS = """
    AssistantMessage {
        height: auto;
    }
    AssistantMessage > .interrupted-note {
        color: $text-muted;
        text-style: italic;
        margin-top: 1;
    }
    """

    def __init__(self, text: str = "", *, interrupted: bool = False) -> None:
        super().__init__(classes="chat-item")
        self.auto_links = False  # it may draw prose itself: no links there, no strip restyling
        self.text = ""
        """The (sanitised) text on screen, without the interrupted note."""
        self.interrupted = interrupted
        self.set_class(interrupted, "-interrupted")
        self.parsed_chars = 0
        """Characters handed to the markdown parser so far (streaming must not re-parse it all)."""
        self._frozen_end = 0
        """``text[:_frozen_end]`` is drawn by ``_frozen`` and never parsed again while the text grows."""
        self._frozen: list[Piece] = []
        self._tail: list[Piece] = []
        self._final = False
        self._composed = False
        self._solo: ProseRun | None = None
        """A reply of prose alone mounts no child: this widget draws that run itself (one
        widget per reply, like before; opening a long session mounts 20 rows at once)."""
        self._note: Static | None = None
        """The "interrupted" line, made when first needed (most replies never are)."""
        self._show_note()
        self._update(safe_text(text), final=True)

    @classmethod
    def from_item(cls, item: ChatItem) -> AssistantMessage:
        """A finished reply from history."""
        return cls(item.text, interrupted=item.interrupted)

    @property
    def pieces(self) -> tuple[Piece, ...]:
        """What the message shows, in order: runs of prose and code blocks."""
        return (*self._frozen, *self._tail)

    @property
    def code_blocks(self) -> list[str]:
        """The text of each code block (fenced or indented), in order, as "copy" would take it."""
        return [w.code for w in self.pieces if isinstance(w, CodeBlock)]

    def compose(self) -> ComposeResult:
        self._composed = True
        pieces = [*self._frozen, *self._tail]
        if len(pieces) == 1 and isinstance(pieces[0], ProseRun) and self._note is None:
            self._solo, pieces[0].owner = pieces[0], self
            return
        yield from map(_widget, pieces)
        if self._note is not None:
            yield self._note

    def render(self) -> Visual | RenderResult:
        if self._solo is not None:
            return self._solo.visual
        return super().render()

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        if self._solo is not None:
            return selection.extract(self._solo.visual.text(self.size.width)), "\n"
        return None

    def show(self, item: ChatItem) -> None:
        """Redraw with a newer version of the item (e.g. it became interrupted, or it is final)."""
        if item.interrupted != self.interrupted:
            self.interrupted = item.interrupted
            self.set_class(item.interrupted, "-interrupted")
            self._show_note()
        self._update(safe_text(item.text), final=True)

    def stream(self, raw: str) -> None:
        """Show the reply so far (``raw`` is the whole text, called many times a second)."""
        self._update(safe_text(raw), final=False)

    # ---- incremental rendering -------------------------------------------------------
    def _update(self, text: str, final: bool) -> None:
        if text == self.text and (self._final or not final) and (self._frozen or self._tail or not text):
            return
        if not text.startswith(self.text[: self._frozen_end]):
            self._reset()
        for piece in (*self._frozen[-1:], *self._tail):
            if isinstance(piece, ProseRun):
                piece.streaming = not final
        tail = text[self._frozen_end :]
        parsed = parse(tail, continued=self._frozen_end > 0)
        self.parsed_chars += len(tail)
        last = len(parsed.tops) - 1
        self._freeze([item for item in parsed.items if item.top < last])
        self._show_tail([item for item in parsed.items if item.top == last], final)
        if last > 0:
            self._frozen_end += _line_offset(tail, parsed.tops[last])
        self.text, self._final = text, final

    def _reset(self) -> None:
        """The text changed before the frozen part (it was replaced): start over."""
        for widget in (*self._frozen, *self._tail):
            self._drop(widget)
        self._frozen, self._tail, self._frozen_end = [], [], 0

    def _freeze(self, items: list[Item]) -> None:
        """Items of blocks that are complete join the frozen part, reusing tail widgets where they fit."""
        for run in group(items, PROSE_CAP):
            last = self._frozen[-1] if self._frozen else None
            head = self._tail[0] if self._tail else None
            first = run[0]
            if isinstance(first, Code):
                if isinstance(head, CodeBlock):
                    self._set_code(head, first, highlighted=True)
                    self._frozen.append(self._tail.pop(0))
                else:
                    self._frozen.append(self._insert(self._code_widget(first, highlighted=True)))
                continue
            prose = plain_items(run)
            if isinstance(last, ProseRun) and last.frozen_size < PROSE_CAP:
                last.freeze(prose)
            elif isinstance(head, ProseRun):
                head.set_items(prose)
                self._frozen.append(self._tail.pop(0))
            else:
                self._frozen.append(self._insert(ProseRun(prose)))

    def _show_tail(self, items: list[Item], final: bool) -> None:
        """The last block's widgets: updated in place when the kind matches, else replaced.

        Prose that starts the last block joins the last frozen run when it has room (as its
        "live" items), so a reply of prose is one run, not one per block.
        """
        runs = list(group(items, PROSE_CAP))
        shared = self._frozen[-1] if self._frozen else None
        if isinstance(shared, ProseRun):
            if runs and not isinstance(runs[0][0], Code) and shared.frozen_size < PROSE_CAP:
                shared.set_live(plain_items(runs.pop(0)))
            else:
                shared.set_live([])
        old = self._tail
        new: list[Piece] = []
        for index, run in enumerate(runs):
            current = old[index] if index < len(old) else None
            first = run[0]
            if isinstance(first, Code):
                highlighted = final or first.code.count("\n") < LIVE_HIGHLIGHT_LINES
                if isinstance(current, CodeBlock):
                    self._set_code(current, first, highlighted=highlighted)
                    new.append(current)
                    continue
                piece: Piece = self._code_widget(first, highlighted=highlighted)
            else:
                prose = plain_items(run)
                if isinstance(current, ProseRun):
                    current.set_items(prose)
                    new.append(current)
                    continue
                piece = ProseRun(prose)
            new.append(self._insert(piece, before=current if current is not None else self._note))
            if current is not None:
                self._drop(current)
        for widget in old[len(new) :]:
            self._drop(widget)
        self._tail = new

    # ---- children ----------------------------------------------------------------------
    def _show_note(self) -> None:
        if self._note is None and self.interrupted:
            self._note = Static(INTERRUPTED_NOTE, classes="interrupted-note", markup=False)
            if self._composed:
                self._unsolo()
                self.mount(self._note)
        if self._note is not None:
            self._note.display = self.interrupted

    @staticmethod
    def _code_widget(item: Code, *, highlighted: bool) -> CodeBlock:
        return CodeBlock(
            item.code, item.lang, label=item.info, indent=item.indent, gap=item.gap, highlighted=highlighted
        )

    @staticmethod
    def _set_code(widget: CodeBlock, item: Code, *, highlighted: bool) -> None:
        widget.set_code(item.code, item.lang, highlighted=highlighted)
        widget.label = item.info
        margin = (1 if item.gap else 0, 0, 0, item.indent)
        if tuple(widget.styles.margin) != margin:
            widget.styles.margin = margin

    def _insert(self, piece: Piece, before: Piece | Widget | None = None) -> Piece:
        """Mount ``piece`` before ``before`` (default: before the tail, else before the note)."""
        if self._composed:
            self._unsolo()
            if before is None:
                before = self._tail[0] if self._tail else self._note
            anchor = before.owner if isinstance(before, ProseRun) else before
            self.mount(_widget(piece), before=anchor)
        return piece

    def _drop(self, piece: Piece) -> None:
        if piece is self._solo:
            self._solo = None
            self.refresh(layout=True)
        elif self._composed:
            widget = piece.owner if isinstance(piece, ProseRun) else piece
            if widget is not None:
                widget.remove()

    def _unsolo(self) -> None:
        """A second child is coming: the run drawn here gets a ProseView like the others."""
        if self._solo is not None:
            solo, self._solo = self._solo, None
            self.mount(ProseView(solo), before=0 if self.children else None)
            self.refresh(layout=True)


Piece = ProseRun | CodeBlock
"""What the message shows, in order: runs of prose and code blocks."""


def _widget(piece: Piece) -> Widget:
    """The widget that shows ``piece`` as a child (a ProseView for a run)."""
    return ProseView(piece) if isinstance(piece, ProseRun) else piece


def plain_items(items: Iterable[Item]) -> list[ProseItem]:
    """The prose items of ``items`` (code blocks left out)."""
    return [item for item in items if not isinstance(item, Code)]
