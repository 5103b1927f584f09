"""Textual's footer, its keys drawn by one widget.

Textual's Footer makes every key a widget of its own (styled at mount, then restyled as its
``compact`` is bound) and rebuilds them all on each bindings signal whose keys changed: a
focus change, a session selected. An attached start draws the keys twice (none are known at
the first frame, then the selected session's), 15-30 ms each, and those were most of the wait
between the first frame and the one that lists 200 restored sessions. Here one
:class:`FooterKeys` draws every key a line at a time, as the FooterKey widgets drew them (same
CSS variables, same spacing); a bindings signal compares the keys and, when they differ,
redraws that one line. Only the command palette's key stays a Textual FooterKey (docked
right, it is composed once).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style as RichStyle
from textual import events
from textual.app import ComposeResult
from textual.geometry import Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from polypilot_tui.domain.dataclass_on_use import dataclass


@dataclass(frozen=True)
class FooterEntry:
    """One key as the footer shows it."""

    key: str
    """The key pressed when the entry is clicked (as the binding names it)."""
    display: str
    """The key as shown (``^q``)."""
    description: str
    action: str
    enabled: bool
    tooltip: str


class FooterKeys(Widget):
    """Every key of the footer in one line: each key as Textual's FooterKey draws it (its key
    bold in the key colours, its words after it), a key that does not apply now dimmed; the key
    under the mouse highlighted, its tooltip shown, a click presses it."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "footer-keys--item",
        "footer-keys--item-hover",
        "footer-keys--disabled",
        "footer-keys--key",
        "footer-keys--description",
    }
    """A key's background (plain, under the mouse), a key that does not apply now, then its two
    parts: the key, its words (FooterKey's rules, component by component)."""

    DEFAULT_CSS = """
    FooterKeys {
        width: auto;
        height: 1;
        text-wrap: nowrap;
        .footer-keys--item {
            background: $footer-item-background;
        }
        .footer-keys--item-hover {
            color: $footer-key-foreground;
            background: $block-hover-background;
        }
        .footer-keys--disabled {
            text-style: dim;
        }
        .footer-keys--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
            padding: 0 1;
        }
        .footer-keys--description {
            padding: 0 1 0 0;
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        &:hover {
            pointer: pointer;
        }
    }
    """

    _hover: reactive[int | None] = reactive(None, repaint=False)
    """The key under the mouse."""

    def __init__(self) -> None:
        super().__init__()
        self._entries: tuple[FooterEntry, ...] = ()
        self._spans: list[tuple[int, int]] = []
        """Each entry's columns (start, end), as last laid out."""
        self._strip: Strip | None = None

    @property
    def entries(self) -> tuple[FooterEntry, ...]:
        """The keys shown, in order."""
        return self._entries

    def set_entries(self, entries: tuple[FooterEntry, ...]) -> None:
        """Show these keys (nothing is redrawn when they are the ones shown)."""
        if entries == self._entries:
            return
        widths_before = [end - start for start, end in self._spans]
        self._entries = entries
        if self.is_mounted:  # else at mount, once its styles are known
            self._lay_out()
        self._strip = None
        self._hover = None
        self._update_tooltip()
        self.refresh(layout=[end - start for start, end in self._spans] != widths_before)

    # ---- geometry ------------------------------------------------------------------
    def _parts(self, entry: FooterEntry) -> tuple[str, str]:
        """A key's two parts as drawn, with their padding ("" words: the key alone, unpadded)."""
        if not entry.description:
            return entry.display, ""
        key_pad = self.get_component_styles("footer-keys--key").padding
        words_pad = self.get_component_styles("footer-keys--description").padding
        return (
            " " * key_pad.left + entry.display + " " * key_pad.right,
            " " * words_pad.left + entry.description + " " * words_pad.right,
        )

    def _lay_out(self) -> None:
        x, self._spans = 0, []
        for entry in self._entries:
            width = sum(cell_len(part) for part in self._parts(entry))
            self._spans.append((x, x + width))
            x += width

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return self._spans[-1][1] if self._spans else 0

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 1

    def _entry_at(self, event: events.MouseEvent) -> int | None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y != 0:
            return None
        return next((i for i, (start, end) in enumerate(self._spans) if start <= offset.x < end), None)

    # ---- drawing -------------------------------------------------------------------
    def notify_style_update(self) -> None:
        super().notify_style_update()  # a new theme draws in new colours, a new padding moves the keys
        self._strip = None
        if self.is_mounted:
            self._lay_out()
        self.refresh(layout=True)

    def on_mount(self) -> None:
        self._lay_out()

    def _style(self, *names: str) -> RichStyle:
        return self.get_visual_style(*names).rich_style  # both cached by Textual

    def _segments(self, index: int, entry: FooterEntry) -> Iterator[Segment]:
        item: tuple[str, ...] = ("footer-keys--item-hover",) if index == self._hover else ("footer-keys--item",)
        if not entry.enabled:
            item = (*item, "footer-keys--disabled")
        key, words = self._parts(entry)
        yield Segment(key, self._style(*item, "footer-keys--key"))
        if words:
            yield Segment(words, self._style(*item, "footer-keys--description"))

    def render_line(self, y: int) -> Strip:
        if self._strip is None:
            segments = [segment for i, entry in enumerate(self._entries) for segment in self._segments(i, entry)]
            self._strip = Strip(segments)
        return self._strip if y == 0 else Strip.blank(self.size.width)

    # ---- the mouse -----------------------------------------------------------------
    def watch__hover(self) -> None:
        self._strip = None
        self.refresh()
        self._update_tooltip()

    def _update_tooltip(self) -> None:
        hover = self._hover
        tooltip = self._entries[hover].tooltip if hover is not None and hover < len(self._entries) else ""
        if (tooltip or None) != self.tooltip:
            self.tooltip = tooltip or None

    def _on_mouse_move(self, event: events.MouseMove) -> None:
        self._hover = self._entry_at(event)

    def _on_leave(self, event: events.Leave) -> None:
        self._hover = None

    def on_mouse_down(self, event: events.MouseDown) -> None:
        index = self._entry_at(event)
        if index is None:
            return
        entry = self._entries[index]
        if entry.enabled:
            self.app.simulate_key(entry.key)
        else:
            self.app.bell()


class KeyFooter(Footer):
    """The keys that apply now: one :class:`FooterKeys` line, redrawn only when they change,
    and the command palette's key on the right.

    Binding groups are drawn key by key (none of our bindings has one), and the footer is never
    compact (no screen asks for it).
    """

    def __init__(self) -> None:
        super().__init__()
        self.keys = FooterKeys()
        """The keys (one widget, however many)."""
        self._palette: FooterEntry | None | bool = False
        """The palette key as composed (None: none shown; False: not composed yet)."""

    def _entries_now(self) -> tuple[FooterEntry, ...]:
        """Each shown binding, one per action (the first bound), as Textual's footer lists them."""
        seen: set[str] = set()
        entries: list[FooterEntry] = []
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            display = self.app.get_key_display(binding)
            entries.append(FooterEntry(binding.key, display, binding.description, binding.action, enabled, tooltip))
        return tuple(entries)

    def _palette_now(self) -> FooterEntry | None:
        """The command palette's key, as the footer shows it on the right (None: not shown)."""
        if not (self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE):
            return None
        found = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        if found is None:
            return None
        _node, binding, enabled, _tooltip = found
        display = self.app.get_key_display(binding)
        tooltip = binding.tooltip or binding.description  # as Textual's footer says it
        return FooterEntry(binding.key, display, binding.description, binding.action, enabled, tooltip)

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:  # the screen's bindings are not known yet: nothing drawn
            return
        self.keys = FooterKeys()  # a fresh one: a removed widget is not mounted again
        self.keys.set_entries(self._entries_now())
        yield self.keys
        self._palette = palette = self._palette_now()
        if palette is not None:
            yield FooterKey(
                palette.key,
                palette.display,
                palette.description,
                palette.action,
                classes="-command-palette",
                disabled=not palette.enabled,
                tooltip=palette.tooltip,
            )

    async def recompose(self) -> None:
        if not self.is_attached:  # its screen went away while the recompose waited: nothing to draw
            return
        if self._palette is not False and self._palette_now() == self._palette:
            self.keys.set_entries(self._entries_now())  # the one line, redrawn if the keys differ
            return
        await super().recompose()
