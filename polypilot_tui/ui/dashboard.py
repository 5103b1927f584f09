"""The dashboard's machinery: a sidebar of sessions, the chat of the selected one, redraws.

The app is a thin view over :class:`~polypilot_tui.engine.manager.SessionManager`. Engine changes
reach the screen one way: the change-stream listener marks the session dirty and posts ONE
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from textual import events
from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.timer import Timer
from textual.widgets import Footer, Header, TextArea

from polypilot_tui.config import DEMO_AGENT, AgentCatalog, Settings
from polypilot_tui.domain.changes import Change, ItemAdded, ItemReplaced, SessionAdded, SessionRemoved, ViewChanged
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.view import SessionView
from polypilot_tui.domain.workspace import Workspace
from polypilot_tui.engine.change_counter import ChangeCounter
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.stream import Unsubscribe
from polypilot_tui.engine.worktree_cleanup import prune_orphaned_worktrees
from polypilot_tui.ui.attention import Alert, Attention
from polypilot_tui.ui.keymap import keymap_path, load_keymap
from polypilot_tui.ui.theming import APP_VARIABLES, BUNDLED_DIR, install_themes, user_themes_dir
from polypilot_tui.ui.ui_state import UiState, load_ui_state, save_ui_state
from polypilot_tui.ui.widgets.chat_log import DEMO_HINT, EMPTY_TEXT
from polypilot_tui.ui.widgets.chat_pane import ChatPane
from polypilot_tui.ui.widgets.session_list import SessionList
from polypilot_tui.ui.widgets.session_sidebar import SessionSidebar

if TYPE_CHECKING:
    from polypilot_tui.engine.persistence import Persistence

log = logging.getLogger(__name__)

Attach = Callable[[SessionManager, Settings], "Persistence"]
"""Restores saved sessions into the manager and keeps them saved (``attach_persistence``)."""


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
        manager: SessionManager,
        clock: Clock,
        *,
        notes: Sequence[str] = (),
        theme_dirs: Sequence[Path] | None = None,
        keymap_file: Path | None = None,
        attach: Attach | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.catalog = catalog
        self.manager = manager
        self.clock = clock
        self.attention = Attention()
        self.selected: str | None = None
        """The session on screen."""
        self._notes: list[tuple[str, str, SeverityLevel]] = [(n, "Configuration", "warning") for n in notes]
        self._theme_dirs = list(theme_dirs) if theme_dirs is not None else [BUNDLED_DIR, user_themes_dir()]
        self._keymap_file = keymap_file if keymap_file is not None else keymap_path()
        self._attach_persistence = attach
        self.persistence: Persistence | None = None
        """Saves sessions while the app runs (None in tests that do not persist)."""
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
        self.changes = ChangeCounter(manager)
        """Counts what each session changed in its folder (the sidebar's +adds −dels)."""
        self.first_workspace: Workspace | None = None
        """Where a first session works when none was saved (ui/launch.py finds it before the app starts)."""
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
        self._unsubscribe = self.manager.subscribe(
            self._on_engine_change, ViewChanged, ItemAdded, ItemReplaced, SessionAdded, SessionRemoved
        )
        self._restore()
        if not self.manager.ids():
            self.start_first_session()
        elif self._ui_state.selected in self.manager.ids():
            self.select(self._ui_state.selected)
        self.set_interval(self.settings.heartbeat_seconds, self.heartbeat, name="heartbeat")
        if self.persistence is not None and not self.persistence.restored.problem:  # it knows every session
            self.run_worker(self._prune_worktrees(), name="prune-worktrees", exit_on_error=False)
        await self.flush()
        self.pane.restore_drafts({k: v for k, v in self._ui_state.drafts.items() if k in self.manager.ids()})
        self.pane.editor.focus()

    async def on_unmount(self) -> None:
        self._unsubscribe()
        self.changes.close()
        self._save_ui_state(quitting=True)
        try:
            await self.manager.quit()
        finally:
            if self.persistence is not None:  # after the quit: the final state is what is saved
                await self.persistence.close()

    async def _prune_worktrees(self) -> None:
        removed = await prune_orphaned_worktrees(self.manager, self.settings.worktree_root)
        if removed:
            self.notify(
                f"Removed {len(removed)} worktree(s) no session used (clean and merged, or already gone).",
                title="Worktrees",
                timeout=8,
                markup=False,
            )

    def _restore(self) -> None:
        if self._attach_persistence is None:
            return
        try:
            self.persistence = self._attach_persistence(self.manager, self.settings)
        except Exception as exc:  # noqa: BLE001 - the dashboard still works, unsaved
            log.exception("restore failed")
            self.notify(
                f"Saved sessions could not be restored, and new ones will not be saved: {exc}",
                severity="error",
                timeout=15,
                markup=False,
            )
            return
        # Saving problems (and their ends) are told once each, with the reason and the path.
        self.persistence.on_notice(
            lambda notice: self.notify(
                notice.message, title="Saving", severity=notice.severity, timeout=20, markup=False
            )
        )
        problem = self.persistence.restored.problem
        if problem:
            self.notify(problem, title="Restore", severity="warning", timeout=10, markup=False)
        self._ui_state, problem = load_ui_state(Path(self.settings.state_dir))
        if problem:
            self.notify(problem, title="Restore", severity="warning", timeout=10, markup=False)

    # ---- where the user is (drafts, selection, scroll): saved while the app runs ----------
    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        """A draft changed: save it soon, so a killed terminal does not bring back old text."""
        self._ui_state_changed()

    def _ui_state_changed(self) -> None:
        if self.persistence is None or self._ui_save_timer is not None:
            return
        self._ui_save_timer = self.set_timer(UI_STATE_DELAY, self._save_ui_state, name="save ui state")

    def _save_ui_state(self, quitting: bool = False) -> None:
        self._ui_save_timer = None
        if self.persistence is None:
            return
        scroll = {
            sid: back
            for sid in self.manager.ids()
            if (log_ := self.pane.log_for(sid)) is not None and (back := log_.scroll_back) > 0
        }
        live = set(self.manager.ids())
        drafts = {sid: text for sid, text in self.pane.drafts().items() if sid in live}
        state = UiState(self.selected, drafts, scroll, list(self._ui_state.recent_folders))
        if state == self._ui_saved:
            return
        problem = save_ui_state(Path(self.settings.state_dir), state)
        if not problem:
            self._ui_saved, self._ui_save_failed = state, False
        elif quitting:
            print(f"polypilot: {problem}", file=sys.stderr)
        elif not self._ui_save_failed:  # told once, until a save works again
            self._ui_save_failed = True
            self.notify(problem, title="Saving", severity="error", timeout=20, markup=False)

    # ---- redraws -------------------------------------------------------------------
    def _on_engine_change(self, change: Change) -> None:
        """The engine's change stream: mark the session dirty and post one EngineChanged."""
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
        notice a session folder deleted by hand, and save where the user is when it changed."""
        self.changes.check_folders()
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
        views = self.manager.views()
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
        elif self.selected in dirty or previous.get(shown.id) != shown or self.pane.session_id != shown.id:
            first_time = self.pane.log_for(shown.id) is None
            await self.pane.show(
                shown,
                self.manager.history(shown.id),
                self.manager.streaming_text(shown.id),
                now,
                self._empty_text(shown),
            )
            if first_time and shown.id in self._ui_state.scroll_back:
                self.pane.scroll_back(shown.id, self._ui_state.scroll_back.pop(shown.id))
        else:
            self.pane.tick(shown, now)
        if self.focused is None and len(self.screen_stack) == 1:
            self.pane.editor.focus()  # e.g. the permission buttons that had focus went away
        needy = sum(1 for v in views if self.attention.wants_user(v))
        count = f"{len(views)} session{'' if len(views) == 1 else 's'}"
        self.sub_title = count + (f" · {needy} need you" if needy else "")
        state = (self.selected, shown.status if shown else None, bool(shown and shown.interrupted_prompt))
        if state != self._binding_state:
            self._binding_state = state
            self.refresh_bindings()

    def _empty_text(self, view: SessionView) -> str:
        config = self.catalog.agents.get(view.agent)
        return EMPTY_TEXT + (DEMO_HINT if config is not None and config.kind == "demo" else "")

    def _ping(self, alert: Alert) -> None:
        self.bell()
        self.notify(alert.message, title=alert.title, severity=alert.severity, markup=False)

    # ---- selection -----------------------------------------------------------------
    def start_first_session(self) -> None:
        """A session to type into when none was saved: the default agent, in the launch folder."""
        agent = self.settings.default_agent
        if agent not in self.catalog.agents:
            self.notify(
                f"Default agent {agent!r} is not configured; using {DEMO_AGENT!r}.", severity="warning", markup=False
            )
            agent = DEMO_AGENT if DEMO_AGENT in self.catalog.agents else next(iter(self.catalog.agents))
        self._add_session(agent, workspace=self.first_workspace)

    def _add_session(self, agent: str, name: str | None = None, workspace: Workspace | None = None) -> str | None:
        try:
            sid = self.manager.add_session(agent, name, workspace=workspace)
        except Exception as exc:  # noqa: BLE001 - a bad agent entry must not crash the app
            self.notify(f"Could not create a session on {agent!r}: {exc}", severity="error", markup=False)
            return None
        self.select(sid)
        return sid

    def select(self, session_id: str) -> None:
        """Put a session on screen; the prompt editor follows at once (this keystroke)."""
        if session_id not in self.manager.ids():
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
        ids = list(self._views) or self.manager.ids()
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
