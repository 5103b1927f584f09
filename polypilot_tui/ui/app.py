"""The dashboard app: what is app-wide — the engine, settings, agents, themes, keymap, alerts,
quitting — around one main screen (:class:`~polypilot_tui.ui.screens.dashboard.DashboardScreen`),
which shows the sessions and owns what the user does to them.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.console import RenderableType
from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen

from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine.api import Engine
from polypilot_tui.ui.action_failures import Failed, attempt
from polypilot_tui.ui.attention import Alert
from polypilot_tui.ui.css_tokens import KeptTokens
from polypilot_tui.ui.formatting import plural, session_names
from polypilot_tui.ui.keymap import keymap_path, load_keymap
from polypilot_tui.ui.notifier import Notifier, desktop_notifier
from polypilot_tui.ui.screens.dashboard import DashboardScreen
from polypilot_tui.ui.stylesheet import AppStylesheet
from polypilot_tui.ui.theming import APP_VARIABLES, BUNDLED_DIR, install_themes, user_themes_dir
from polypilot_tui.ui.widgets.chat_pane import ChatPane
from polypilot_tui.ui.widgets.session_sidebar import SessionSidebar

log = logging.getLogger(__name__)


class PolypilotApp(App[int]):
    """Drive several agent sessions at once and see, honestly, what each one is doing."""

    TITLE = "polypilot"
    CSS_PATH = ["app.tcss", "widgets/session_sidebar.tcss", "widgets/chat_pane.tcss"]
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", id="quit", priority=True)]

    def __init__(
        self,
        settings: Settings,
        catalog: AgentCatalog,
        engine: Engine,
        clock: Clock,
        *,
        notes: Sequence[str] = (),
        theme_dirs: Sequence[Path] | None = None,
        keymap_file: Path | None = None,
        remote: str | None = None,
        launch_folder: str | None = None,
    ) -> None:
        super().__init__()
        self.style_tokens = KeptTokens()
        """The style sources' tokens: kept from the last start once :meth:`keep_style_tokens` is asked."""
        self._writing_tokens: threading.Thread | None = None
        self.stylesheet = AppStylesheet(variables=self.theme_variables, tokens=self.style_tokens)  # Textual's args
        self.settings = settings
        self.catalog = catalog
        self.engine = engine
        """The sessions: in this process, or in the engine service this dashboard is attached to."""
        self.remote = remote
        """The machine the engine runs on when it is another one (over SSH), else None."""
        self.clock = clock
        self.notifier: Notifier | None = desktop_notifier(settings.notifications, self._write_to_terminal)
        """Where alerts go while the terminal is not focused (None: notifications are off)."""
        self.stop_engine_on_quit = not engine.separate
        """Quitting ends the engine too: always in this process; an attached dashboard leaves it
        running (a closed terminal, a signal) unless the user asks to stop it."""
        self._notes: list[tuple[str, str, SeverityLevel]] = [(n, "Configuration", "warning") for n in notes]
        self._keymap_file = keymap_file if keymap_file is not None else keymap_path()
        self.dashboard = DashboardScreen(
            settings,
            catalog,
            engine,
            clock,
            remote=remote,
            launch_folder=launch_folder or ("~" if remote is not None else os.getcwd()),
            alert=self.alert,
        )
        """The main screen: the sessions, and what the user does to them."""
        # The theme is set before anything mounts: switching it later restyles every
        # widget, which with 200 restored sessions cost seconds at start-up.
        theme_dirs = list(theme_dirs) if theme_dirs is not None else [BUNDLED_DIR, user_themes_dir()]
        self._notes += install_themes(self, theme_dirs, settings.theme)
        self._freeze_heap = False
        self.heap_freezes = 0
        """How many times the heap was frozen (at most once: see :meth:`freeze_heap_after_first_frame`)."""

    # ---- the main screen, as tests and scripts reach it ------------------------------
    @property
    def pane(self) -> ChatPane:
        """The selected session's chat (the main screen's)."""
        return self.dashboard.pane

    @property
    def sidebar(self) -> SessionSidebar:
        """The list of sessions (the main screen's)."""
        return self.dashboard.sidebar

    @property
    def selected(self) -> str | None:
        """The session on the main screen."""
        return self.dashboard.selected

    def select(self, session_id: str) -> None:
        """Put a session on the main screen."""
        self.dashboard.select(session_id)

    # ---- set-up --------------------------------------------------------------------
    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_VARIABLES)

    def get_default_screen(self) -> Screen[Any]:
        return self.dashboard

    def freeze_heap_after_first_frame(self) -> None:
        """Once the first frame is drawn, freeze the heap (``gc.freeze()``) and turn collections
        back on (``polypilot`` starts with them off: entry.py): only a real launch asks
        (ui/launch.py), never a test's app, whose process would keep every earlier test's
        garbage for good.

        What is alive then (the interpreter, Textual, its CSS and caches, the dashboard, the
        sessions' views) lives as long as the dashboard, yet every full collection walked all of
        it: with a 20,000-line diff open that was most of a scroll's p99 lag and of a diff
        view's first frame (~250 ms vs ~140-178 ms frozen). Frozen objects are never collected: a
        cycle that start-up left as garbage stays, once; what is made later is collected as
        before. After the first frame, so that frame pays nothing for it."""
        self._freeze_heap = True

    def keep_style_tokens(self) -> None:
        """Parse the style sources from the tokens the last start kept in the state folder, and
        keep this start's (ui/css_tokens.py: ~10 ms of the first frame). Only a real launch
        asks (ui/launch.py): a test's app tokenizes, as the first start does."""
        self.style_tokens.keep_in(Path(self.settings.state_dir))

    def _keep_tokens(self) -> None:
        """After the first frame: the tokens it made (at a first start) are written, off this
        thread (a write is synced to disk); the dashboard's end waits for it."""
        data = self.style_tokens.pending()
        if data is not None:
            self._writing_tokens = threading.Thread(target=self.style_tokens.write, args=(data,), name="css-tokens")
            self._writing_tokens.start()

    def _heap_frozen(self) -> None:
        gc.freeze()
        gc.enable()  # off since the command started (entry.py)
        self.heap_freezes += 1

    async def on_mount(self) -> None:
        if self._freeze_heap:
            self.call_after_refresh(self._heap_frozen)
        self.call_after_refresh(self._keep_tokens)
        keymap, problem = load_keymap(self._keymap_file)
        self.set_keymap(keymap)
        if problem:
            self.notify(problem, title="Keymap", severity="warning", markup=False)
        for message, title, severity in self._notes:
            self.notify(message, title=title, severity=severity, timeout=15, markup=False)
        self.dashboard.follow_engine()
        self.dashboard.recall_where_the_user_was()
        started = await attempt(log, "the engine's start", self.engine.start())
        if isinstance(started, Failed):  # said on screen; the dashboard stays to read it
            self.notify(f"The engine did not start: {started.said}", severity="error", timeout=30, markup=False)
        # Saving, restore and engine problems are told once each, with the reason and the path.
        self.engine.on_notice(
            lambda notice: self.notify(
                notice.message, title=notice.title, severity=notice.severity, timeout=20, markup=False
            )
        )
        # Started by a person at this terminal: alerts come here (told after the first frame,
        # which needs no more of the engine than its snapshot).
        self.call_after_refresh(self.on_app_focus)
        await self.dashboard.show_sessions()

    async def on_unmount(self) -> None:
        if self._writing_tokens is not None:
            self._writing_tokens.join()
        data = self.style_tokens.pending()  # a dialog's, first opened in this run
        if data is not None:
            self.style_tokens.write(data)
        # The main screen is gone by now (it saved where the user was); the engine goes last.
        await self.engine.detach(stop_engine=self.stop_engine_on_quit)

    # ---- alerts ----------------------------------------------------------------------
    def on_app_focus(self, _event: events.AppFocus | None = None) -> None:
        """The terminal has the focus: attention alerts of every dashboard attached come here."""
        self.run_worker(self.engine.focus(), group="focus", exclusive=True, exit_on_error=False)

    def alert(self, alert: Alert) -> None:
        """A session needs the user: the bell, a toast and, while another window has the
        focus, a desktop notification."""
        self.bell()
        self.notify(alert.message, title=alert.title, severity=alert.severity, markup=False)
        if not self.app_focus and self.notifier is not None:  # the user is in another window
            notice = self.notifier.notify(alert.title, alert.message)
            self.run_worker(notice, group="desktop notification", exit_on_error=False)

    def _write_to_terminal(self, text: str) -> None:
        """Write an escape sequence to the terminal, as Textual's own bell and clipboard do."""
        if not self.is_headless and self._driver is not None:
            self._driver.write(text)

    # ---- quitting --------------------------------------------------------------------
    def exit(self, result: int | None = None, return_code: int = 0, message: RenderableType | None = None) -> None:
        """Every way out (ctrl+q, a signal): the main screen keeps its scroll positions first."""
        if self.is_running:
            self.dashboard.quitting()
        super().exit(result, return_code, message)

    async def action_quit(self) -> None:
        """Quit; with turns in flight, ask first (they are offered for resending next time). With
        several machines only this one's count: the hosts' engines go on whatever is chosen."""
        busy = [v for v in self.engine.views() if v.status.busy and not self.engine.host_of(v.id)]
        if self.engine.separate:
            self._quit_attached(busy)
            return
        if not busy:
            self.exit()
            return
        message = (
            f"{plural(len(busy), 'turn')} still running ({session_names(busy)}). Quitting stops "
            f"{'it' if len(busy) == 1 else 'them'}; each is offered for resending (ctrl+y) next time."
        )
        queued = sum(len(v.queue) for v in self.engine.views())
        if queued:
            message += f" {plural(queued, 'queued prompt')} {'is' if queued == 1 else 'are'} kept for next time."

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()
            else:
                self.pane.editor.focus()

        from polypilot_tui.ui.screens.confirm import ConfirmScreen  # dialogs: imported when first opened

        self.push_screen(ConfirmScreen("Quit with turns running?", message, "Quit"), answered)

    def _quit_attached(self, busy: list[SessionView]) -> None:
        """Quit a dashboard attached to the engine: its sessions go on unless the user stops it."""
        if not busy:
            self.exit()
            return

        def answered(choice: object) -> None:
            if choice in ("leave", "stop"):
                self.stop_engine_on_quit = choice == "stop"
                self.exit()
            else:
                self.pane.editor.focus()

        from polypilot_tui.ui.screens.quit import QuitScreen

        self.push_screen(QuitScreen(busy), answered)

    def action_stop_engine(self) -> None:
        """Quit and stop the engine: every session ends (turns in flight are offered for resending)."""
        self.stop_engine_on_quit = True
        self.exit()

    def action_help_quit(self) -> None:
        """ctrl+c with nothing selected: it neither stops nor quits, so say which keys do."""
        keys = {binding.binding.action.removeprefix("app."): key for key, binding in self.active_bindings.items()}
        busy = self.screen is self.dashboard and self.dashboard.busy_selected()
        hints = [f"{keys['stop']} stops this turn"] if "stop" in keys and busy else []
        hints += [f"{keys['quit']} quits"] if "quit" in keys else []
        self.notify(" · ".join(hints + ["ctrl+c copies selected text"]), timeout=4, markup=False)

    # ---- command palette -----------------------------------------------------------
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Every session action (on the main screen), with its key in the help text, then Textual's own."""
        if screen is self.dashboard:
            yield from self.dashboard.commands()
        if self.engine.separate:
            yield SystemCommand(
                "Stop the engine and quit",
                "End every session's agent now (turns in flight are offered for resending next time)"
                + (" — on this machine: the other machines' engines go on" if self.engine.hosts() else ""),
                self.action_stop_engine,
            )
        yield from super().get_system_commands(screen)
