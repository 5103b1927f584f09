"""Where a new session runs, when the dashboard drives several machines: the host picker.

The new-session dialog opens on the host picked here (its agents, its folders). A host that
does not answer is listed, greyed out, with why; Enter picks, Escape cancels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from polypilot_tui.domain.hosts import HostView
from polypilot_tui.engine.api import Engine
from polypilot_tui.ui.formatting import plural
from polypilot_tui.ui.host_text import HOST_ICONS, host_detail, host_state


def host_option(host: HostView, now: float, wall_now: float) -> Option:
    """A host to pick: its name, where it is, its sessions; one not answering greyed out with why."""
    where = host.target or "this machine"
    label = Content.assemble(
        (f"{HOST_ICONS[host.state]} ", "$success" if host.live else "$text-warning"),
        (host.label, "bold"),
        f"  {where} · {plural(host.sessions, 'session')}",
    )
    if not host.live:
        detail = host_detail(host, now)
        why = host_state(host, now, wall_now) + (f" · {detail}" if detail else "")
        label = Content.assemble(label, "\n", (f"  ✗ {why}", "$text-error"))
    return Option(label, id=host.name or "-local", disabled=not host.live)


class HostPickerScreen(ModalScreen[str | None]):
    """Dismisses with the picked host's name ("" this machine), or None (cancelled)."""

    DEFAULT_CSS = """
    HostPickerScreen {
        align: center middle;
        background: $background 60%;
    }
    #host-picker {
        width: 80;
        max-width: 95%;
        height: auto;
        max-height: 95%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    #host-picker-title {
        text-style: bold;
        padding-bottom: 1;
    }
    #host-list {
        height: auto;
        max-height: 16;
    }
    #host-picker-hint {
        color: $text-muted;
        padding-top: 1;
    }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(
        self, hosts: Sequence[HostView], default: str, now: float, wall_now: float, title: str = "New session on…"
    ) -> None:
        super().__init__()
        self._title = title
        self._hosts = list(hosts)
        self._default = default
        self._now = now
        self._wall_now = wall_now

    def compose(self) -> ComposeResult:
        with Vertical(id="host-picker"):
            yield Static(self._title, id="host-picker-title", markup=False)
            yield OptionList(*[host_option(host, self._now, self._wall_now) for host in self._hosts], id="host-list")
            yield Static("Enter picks · Esc cancels", id="host-picker-hint", markup=False)

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        live = [host.name for host in self._hosts if host.live]
        if live:
            pick = self._default if self._default in live else live[0]
            options.highlighted = [host.name for host in self._hosts].index(pick)
        options.focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        host = self._hosts[event.option_index]
        if host.live:
            self.dismiss(host.name)

    def action_cancel(self) -> None:
        self.dismiss(None)


def pick_host(
    owner: Widget,
    engine: Engine,
    default: str,
    picked: Callable[[str], None],
    cancelled: Callable[[], None],
    title: str = "New session on…",
) -> None:
    """Ask which of ``engine``'s machines (starting on ``default``), then call ``picked`` with its name."""
    clock = engine.clock  # the hosts' times are on it

    def answered(name: str | None) -> None:
        if name is None:
            cancelled()
        else:
            picked(name)

    owner.app.push_screen(HostPickerScreen(engine.hosts(), default, clock.now(), clock.wall(), title), answered)
