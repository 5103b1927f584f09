"""The dashboard's machinery: a sidebar of sessions, the chat of the selected one, redraws.

The app is a thin view over an :class:`~polypilot_tui.engine.api.Engine`. Engine changes
reach the screen one way: the record-stream listener marks the session dirty and posts ONE
:class:`EngineChanged` message (Textual's ``post_message`` is safe from any thread and any
context — the Copilot SDK delivers events through ``call_soon_threadsafe``, outside the
app's context, where a Textual timer cannot even start). The message handler runs in the
app's own context and arms the coalesced redraw, so a burst of deltas is one redraw. A
heartbeat (``settings.heartbeat_seconds``) flushes directly, never through that guard, so a
lost redraw is repaired within one beat; views equal to the last ones redraw nothing but the
"ago" labels, which read the injected clock (never the wall time).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from textual import events
from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.timer import Timer
from textual.widgets import Footer, Header, TextArea

from polypilot_tui.config import DEMO_AGENT, AgentCatalog, Settings
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.records import ItemAdded, ItemReplaced, Record, SessionAdded, SessionRemoved, ViewChanged
from polypilot_tui.domain.usage import fleet_usage
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine, EngineError
from polypilot_tui.engine.stream import Unsubscribe
from polypilot_tui.ui.action_failures import Failed, attempt
from polypilot_tui.ui.attention import Alert, Attention
from polypilot_tui.ui.keymap import keymap_path, load_keymap
from polypilot_tui.ui.notifier import Notifier, desktop_notifier
from polypilot_tui.ui.theming import APP_VARIABLES, BUNDLED_DIR, install_themes, user_themes_dir
from polypilot_tui.ui.ui_state import UiState, load_ui_state, save_ui_state
from polypilot_tui.ui.usage_text import fleet_summary
from polypilot_tui.ui.welcome import AgentsFound
from polypilot_tui.ui.widgets.chat_pane import ChatPane
from polypilot_tui.ui.widgets.session_list import SessionList
from polypilot_tui.ui.widgets.session_sidebar import SessionSidebar

log = logging.getLogger(__name__)

RENDER_INTERVAL = 0.05
"""Seconds between coalesced redraws (PolyPilot's render debounce)."""
UI_STATE_DELAY = 1.0
"""A changed draft or selection is saved this many seconds later (and at quit)."""


class EngineChanged(Message, bubble=False):
    """Sessions changed in the engine; the app redraws what is dirty (one per burst)."""


class Dashboard(App[int]):
    """The dashboard's screen machinery: layout, engine changes to redraws, selection.

    :class:`~polypilot_tui.ui.app.PolypilotApp` adds the keys and what they do.
    """

    TITLE = "polypilot"
    CSS_PATH = ["app.tcss", "widgets/session_sidebar.tcss", "widgets/chat_pane.tcss"]

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
    ) -> None:
        super().__init__()
        self.settings = settings
        self.catalog = catalog
        self.engine = engine
        """The sessions: in this process, or in the engine service this dashboard is attached to."""
        self.remote = remote
        """The machine the engine runs on when it is another one (over SSH), else None."""
        self.clock = clock
        self.attention = Attention()
        self.notifier: Notifier | None = desktop_notifier(settings.notifications, self._write_to_terminal)
        """Where alerts go while the terminal is not focused (None: notifications are off)."""
        self.selected: str | None = None
        """The session on screen."""
        self._notes: list[tuple[str, str, SeverityLevel]] = [(n, "Configuration", "warning") for n in notes]
        self._theme_dirs = list(theme_dirs) if theme_dirs is not None else [BUNDLED_DIR, user_themes_dir()]
        self._keymap_file = keymap_file if keymap_file is not None else keymap_path()
        self._views: dict[str, SessionView] = {}
        self._dirty: set[str] = set()
        self._redraw_posted = False
        """An EngineChanged is on its way (or a redraw is armed); cleared by every flush."""
        self._last_flush = float("-inf")
        self._flush_lock = asyncio.Lock()
        self.redraws = 0
        """Flushes run so far (a burst of engine changes should cost one)."""
        self._binding_state: tuple[object, ...] = ()
        self._unsubscribe: Unsubscribe = lambda: None
        self._ui_state = UiState()
        """Where the user was when the last run ended (restored as sessions are first shown)."""
        self._ui_saved: UiState | None = None
        self._ui_save_timer: Timer | None = None
        self._ui_save_failed = False
        self.stop_engine_on_quit = not engine.separate
        """Quitting ends the engine too: always in this process; an attached dashboard leaves it
        running (a closed terminal, a signal) unless the user asks to stop it."""
        self.agents_found = AgentsFound()  # for the demo's welcome
        self.first_folder: str | None = None
        """Where a first session works when none was saved: the folder polypilot started in
        (ui/launch.py says; None: its agent's own folder, where the engine runs)."""
        self.sidebar = SessionSidebar(id="sidebar")
        self.pane = ChatPane(id="chat-pane")
        # The theme is set before anything mounts: switching it later restyles every
        # widget, which with 200 restored sessions cost seconds at start-up.
        self._notes += install_themes(self, self._theme_dirs, settings.theme)

    # ---- set-up --------------------------------------------------------------------
    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_VARIABLES)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        with Horizontal(id="main"):
            yield self.sidebar
            yield self.pane
        yield Footer()

    async def on_mount(self) -> None:
        keymap, problem = load_keymap(self._keymap_file)
        self.set_keymap(keymap)
        if problem:
            self.notify(problem, title="Keymap", severity="warning", markup=False)
        for message, title, severity in self._notes:
            self.notify(message, title=title, severity=severity, timeout=15, markup=False)
        # What the screen shows (not raw agent events or actions: the views reflect those).
        self._unsubscribe = self.engine.subscribe(
            self._on_engine_change, ViewChanged, ItemAdded, ItemReplaced, SessionAdded, SessionRemoved
        )
        started = await attempt(log, "the engine's start", self.engine.start())
        if isinstance(started, Failed):  # said on screen; the dashboard stays to read it
            self.notify(f"The engine did not start: {started.said}", severity="error", timeout=30, markup=False)
        # Saving, restore and engine problems are told once each, with the reason and the path.
        self.engine.on_notice(
            lambda notice: self.notify(
                notice.message, title=notice.title, severity=notice.severity, timeout=20, markup=False
            )
        )
        if self.engine.persistent:
            self._ui_state, problem = load_ui_state(Path(self.settings.state_dir))
            if problem:
                self.notify(problem, title="Restore", severity="warning", timeout=10, markup=False)
        self.run_worker(self.look_for_agents(), group="agents", exclusive=True, exit_on_error=False)
        if not self.engine.ids():
            await self.start_first_session()
        elif self._ui_state.selected in self.engine.ids():
            self.select(self._ui_state.selected)
        self.set_interval(self.settings.heartbeat_seconds, self.heartbeat, name="heartbeat")
        self.on_app_focus()  # started by a person at this terminal: alerts come here
        await self.flush()
        self.pane.restore_drafts({k: v for k, v in self._ui_state.drafts.items() if k in self.engine.ids()})
        self.pane.editor.focus()

    async def on_unmount(self) -> None:
        self._unsubscribe()
        self._save_ui_state(quitting=True)
        await self.engine.detach(stop_engine=self.stop_engine_on_quit)

    # ---- where the user is (drafts, selection, scroll): saved while the app runs ----------
    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        """A draft changed: save it soon, so a killed terminal does not bring back old text."""
        self._ui_state_changed()

    def _ui_state_changed(self) -> None:
        if not self.engine.persistent or self._ui_save_timer is not None:
            return
        self._ui_save_timer = self.set_timer(UI_STATE_DELAY, self._save_ui_state, name="save ui state")

    def _save_ui_state(self, quitting: bool = False) -> None:
        self._ui_save_timer = None
        if not self.engine.persistent:
            return
        scroll = {
            sid: back
            for sid in self.engine.ids()
            if (log_ := self.pane.log_for(sid)) is not None and (back := log_.scroll_back) > 0
        }
        live = set(self.engine.ids())
        drafts = {sid: text for sid, text in self.pane.drafts().items() if sid in live}
        state = UiState(self.selected, drafts, scroll, list(self._ui_state.recent_folders))
        if state == self._ui_saved:
            return
        problem = save_ui_state(Path(self.settings.state_dir), state, self._ui_saved)
        if not problem:
            self._ui_saved, self._ui_save_failed = state, False
        elif quitting:
            print(f"polypilot: {problem}", file=sys.stderr)
        elif not self._ui_save_failed:  # told once, until a save works again
            self._ui_save_failed = True
            self.notify(problem, title="Saving", severity="error", timeout=20, markup=False)

    # ---- redraws -------------------------------------------------------------------
    def _on_engine_change(self, change: Record) -> None:
        """The engine's record stream: mark the session dirty and post one EngineChanged."""
        self._dirty.add(change.session_id)
        self._request_redraw()

    def _request_redraw(self) -> None:
        if self._redraw_posted:
            return
        self._redraw_posted = True
        if not self.post_message(EngineChanged()):
            self._redraw_posted = False  # the app is closing: nothing to draw

    def on_engine_changed(self, message: EngineChanged) -> None:
        """In the app's context: arm the coalesced redraw."""
        if not self.is_running:
            return
        # At most one redraw per RENDER_INTERVAL: a stream of deltas from 20 sessions costs
        # ~20 redraws a second, not one per event (the screen cannot show more anyway).
        wait = self._last_flush + RENDER_INTERVAL - self.clock.now()
        if wait > 0:
            self.set_timer(wait, self.flush, name="coalesced redraw")
        else:
            self.call_later(self.flush)

    async def heartbeat(self) -> None:
        """Refresh "ago" labels, repair a lost redraw (flushes directly, never via the guard),
        and save where the user is when it changed."""
        await self.flush()
        self._save_ui_state()

    async def flush(self) -> None:
        """Redraw what changed since the last flush (one flush at a time)."""
        async with self._flush_lock:
            self._redraw_posted = False  # changes from here on post a new EngineChanged
            if not self.is_running or not self.screen_stack:
                return  # a coalesced redraw that came due while the app was shutting down
            await self._flush_views()

    async def _flush_views(self) -> None:
        self._last_flush = self.clock.now()
        self.redraws += 1
        dirty, self._dirty = self._dirty, set()
        views = self.engine.views()
        now = self.clock.now()
        current = {view.id: view for view in views}
        for view in views:
            before = self._views.get(view.id)
            if before != view:
                alert = self.attention.observe(before, view, on_screen=view.id == self.selected and self.app_focus)
                if alert is not None:
                    self._ping(alert)
        for gone in set(self._views) - set(current):
            self.attention.forget(gone)
            await self.pane.forget(gone)
        previous = self._views
        self._views = current
        if self.selected not in current:
            self.selected = views[0].id if views else None
            self.pane.bind(self.selected)
        if self.selected is not None:
            self.attention.seen(self.selected)
        await self.sidebar.sync(views, now, self.attention.unread, self.selected)
        shown = current.get(self.selected) if self.selected else None
        if shown is None:
            await self.pane.show(None, (), "", now)
        elif (
            self.selected in dirty
            or previous.get(shown.id) != shown
            or self.pane.session_id != shown.id
            or ((log := self.pane.log_for(shown.id)) is not None and log.shows_unreadable)  # until read
        ):
            first_time = self.pane.log_for(shown.id) is None
            await self.pane.show(
                shown,
                self.engine.history(shown.id),
                self.engine.streaming_text(shown.id),
                now,
                self.agents_found.empty_text(shown, self.catalog),
            )
            if first_time and shown.id in self._ui_state.scroll_back:
                self.pane.scroll_back(shown.id, self._ui_state.scroll_back.pop(shown.id))
        else:
            self.pane.tick(shown, now)
        if self.focused is None and len(self.screen_stack) == 1:
            self.pane.editor.focus()  # e.g. the permission buttons that had focus went away
        needy = sum(1 for v in views if self.attention.wants_user(v))
        count = f"{len(views)} session{'' if len(views) == 1 else 's'}"
        spent = fleet_summary(fleet_usage(v.usage for v in views))  # what the whole fleet used
        self.sub_title = (
            count
            + (f" · {needy} need{'s' if needy == 1 else ''} you" if needy else "")
            + (f" · on {self.remote}" if self.remote else "")
            + (f" · {spent}" if spent else "")
        )
        state = (self.selected, shown.status if shown else None, bool(shown and shown.interrupted_prompt))
        if state != self._binding_state:
            self._binding_state = state
            self.refresh_bindings()

    def on_app_focus(self, _event: events.AppFocus | None = None) -> None:
        """The terminal has the focus: attention alerts of every dashboard attached come here."""
        self.run_worker(self.engine.focus(), group="focus", exclusive=True, exit_on_error=False)

    async def look_for_agents(self) -> None:
        """Ask the engine which agents it can start (the demo's welcome names them); at start."""
        await self.agents_found.look(self.engine)
        self._dirty.update(self.engine.ids())
        self._request_redraw()

    def _ping(self, alert: Alert) -> None:
        if not self.engine.alerts_here():
            return  # another dashboard's terminal has the focus: it rings there
        self.bell()
        self.notify(alert.message, title=alert.title, severity=alert.severity, markup=False)
        if not self.app_focus and self.notifier is not None:  # the user is in another window
            notice = self.notifier.notify(alert.title, alert.message)
            self.run_worker(notice, group="desktop notification", exit_on_error=False)

    def _write_to_terminal(self, text: str) -> None:
        """Write an escape sequence to the terminal, as Textual's own bell and clipboard do."""
        if not self.is_headless and self._driver is not None:
            self._driver.write(text)

    # ---- selection -----------------------------------------------------------------
    async def start_first_session(self) -> None:
        """A session to type into when none was saved: the default agent, in the launch folder."""
        agent = self.settings.default_agent
        if agent not in self.catalog.agents:
            self.notify(
                f"Default agent {agent!r} is not configured; using {DEMO_AGENT!r}.", severity="warning", markup=False
            )
            agent = DEMO_AGENT if DEMO_AGENT in self.catalog.agents else next(iter(self.catalog.agents))
        if self.first_folder is not None:
            try:
                self.select(
                    await self.engine.call(verbs.NEW_SESSION, verbs.NewSession(agent, folder=self.first_folder))
                )
                return
            except EngineError as exc:  # the folder is gone, say: the agent's own folder then
                log.info("the first session does not work in %s: %s", self.first_folder, exc)
        await self.add_session(verbs.NewSession(agent))

    async def add_session(self, request: verbs.NewSession) -> str | None:
        """Start a session and put it on screen; None (and a toast saying why) when it cannot be."""
        sid = await attempt(log, f"a new session on {request.agent!r}", self.engine.call(verbs.NEW_SESSION, request))
        if isinstance(sid, Failed):  # a bad agent entry, a folder that cannot be used: said, never a crash
            self.notify(f"Could not create a session on {request.agent!r}: {sid.said}", severity="error", markup=False)
            return None
        self.select(sid)
        return sid

    def select(self, session_id: str) -> None:
        """Put a session on screen; the prompt editor follows at once (this keystroke)."""
        if session_id not in self.engine.ids():
            return
        self.pane.bind(session_id)
        if session_id == self.selected:
            return
        self.selected = session_id
        self._ui_state_changed()
        self.attention.seen(session_id)
        self._dirty.add(session_id)
        self._request_redraw()

    def on_session_sidebar_picked(self, event: SessionSidebar.Picked) -> None:
        self.select(event.session_id)  # only the user moves the highlight (see SessionList.highlight)
        if event.chosen:  # a click or Enter: back to typing
            self.pane.editor.focus()

    def on_key(self, event: events.Key) -> None:
        """Typing while the session list has the focus goes to the prompt, never lost."""
        if event.is_printable and event.character and isinstance(self.focused, SessionList):
            event.stop()
            self.pane.editor.focus()
            self.pane.editor.insert(event.character)

    def _step(self, delta: int) -> None:
        ids = list(self._views) or self.engine.ids()
        if not ids:
            return
        index = ids.index(self.selected) if self.selected in ids else 0
        self.select(ids[(index + delta) % len(ids)])

    def action_previous_session(self) -> None:
        """Select the session above."""
        self._step(-1)

    def action_next_session(self) -> None:
        """Select the session below."""
        self._step(1)
