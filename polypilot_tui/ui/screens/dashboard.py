"""The main screen: a sidebar of sessions, the chat of the selected one, and what the user
does to a session — send, queue, answer, stop, reconnect, close (with undo), copy, rename,
finish, switch model, review its changes.

The screen is a thin view over an :class:`~polypilot_tui.engine.api.Engine`. Engine changes
reach it one way: the record-stream listener marks the session dirty and posts ONE
:class:`EngineChanged` message (Textual's ``post_message`` is safe from any thread and any
context — the Copilot SDK delivers events through ``call_soon_threadsafe``, outside the
app's context, where a Textual timer cannot even start). The message handler runs in the
screen's own context and arms the coalesced redraw, so a burst of deltas is one redraw. A
heartbeat (``settings.heartbeat_seconds``) flushes directly, never through that guard, so a
lost redraw is repaired within one beat; views equal to the last ones redraw nothing but the
"ago" labels, which read the injected clock (never the wall time).

Every engine call runs as a worker whose failure becomes a toast, never a crash; every prompt
goes to the session it was typed for.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from textual import events
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Header, TextArea

from polypilot_tui.config import DEMO_AGENT, AgentCatalog, Settings
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.hosts import HostView
from polypilot_tui.domain.records import (
    HostChanged,
    ItemAdded,
    ItemReplaced,
    Record,
    SessionAdded,
    SessionRemoved,
    ViewChanged,
)
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.usage import fleet_usage
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import Engine, EngineError
from polypilot_tui.engine.stream import Unsubscribe
from polypilot_tui.ui.action_failures import Failed, attempt
from polypilot_tui.ui.attention import Alert, Attention
from polypilot_tui.ui.broadcast import Broadcaster, Marks
from polypilot_tui.ui.formatting import plural
from polypilot_tui.ui.host_text import host_problem, host_state, machines
from polypilot_tui.ui.screens.compare_flow import CompareFlow
from polypilot_tui.ui.screens.fan_out_flow import FanOutFlow
from polypilot_tui.ui.screens.new_session_flow import NewSessionFlow
from polypilot_tui.ui.screens.review_flow import ReviewFlow
from polypilot_tui.ui.screens.team_flow import TeamFlow
from polypilot_tui.ui.ui_state import UiState, load_ui_state, remember_folder, save_ui_state
from polypilot_tui.ui.usage_text import fleet_summary
from polypilot_tui.ui.welcome import AgentsFound
from polypilot_tui.ui.widgets.chat_pane import ChatPane
from polypilot_tui.ui.widgets.key_footer import KeyFooter
from polypilot_tui.ui.widgets.permission_prompt import PermissionPrompt
from polypilot_tui.ui.widgets.prompt_editor import PromptEditor
from polypilot_tui.ui.widgets.queue_panel import QueuePanel
from polypilot_tui.ui.widgets.session_list import SessionList
from polypilot_tui.ui.widgets.session_sidebar import SessionSidebar

log = logging.getLogger(__name__)

RENDER_INTERVAL = 0.05
"""Seconds between coalesced redraws (PolyPilot's render debounce)."""
UI_STATE_DELAY = 1.0
"""A changed draft or selection is saved this many seconds later (and at quit)."""
UNDO_SECONDS = 30.0
"""How long a closed session can be brought back (agent-deck keeps 30 s too)."""


class EngineChanged(Message, bubble=False):
    """Sessions changed in the engine; the screen redraws what is dirty (one per burst)."""


@dataclass
class ClosedSession:
    """A session closed moments ago (the engine keeps it, and its place in the list, for an undo)."""

    session_id: str
    name: str
    draft: str


class DashboardScreen(Screen[None]):
    """Drive several agent sessions at once and see, honestly, what each one is doing."""

    AUTO_FOCUS = "PromptEditor"
    """Typing goes to the prompt: at start, and when a dialog closes leaving no focus."""
    BINDINGS = [
        # The app's quit, listed here too so the footer shows it where it always was: before
        # the session keys (the app's own binding serves the other screens).
        Binding("ctrl+q", "app.quit", "Quit", id="quit", priority=True),
        Binding("ctrl+n", "new_session", "New", id="new_session", priority=True),
        Binding("ctrl+x", "stop", "Stop", id="stop", priority=True),
        Binding("ctrl+r", "reconnect", "Reconnect", id="reconnect", priority=True),
        Binding("ctrl+up", "previous_session", "Prev", id="previous_session", priority=True, show=False),
        Binding("ctrl+down", "next_session", "Next", id="next_session", priority=True),
        Binding("ctrl+g", "attention", "Attention", id="attention", priority=True),
        Binding("ctrl+y", "resend_interrupted", "Resend", id="resend_interrupted", priority=True),
        # Only while a closed session can come back; otherwise ctrl+z is the editor's undo.
        Binding("ctrl+z", "undo_close", "Undo close", id="undo_close", priority=True),
        Binding("ctrl+o", "review_changes", "Changes", id="review_changes", priority=True),
        Binding("f2", "details", "Details", id="details"),
        Binding("f3", "copy_reply", "Copy reply", id="copy_reply", show=False),
        Binding("f5", "finish_session", "Finish", id="finish_session", show=False),
        Binding("f4", "rename_session", "Rename", id="rename_session", show=False),
        Binding("f8", "switch_model", "Model", id="switch_model", show=False),  # F6/F7: the editor's
        # Marks for a broadcast. ctrl+t ("tag"): a control key, as the sidebar has no letters
        # of its own, and one no terminal or tmux takes (ctrl+space arrives as ctrl+@ or not
        # at all). Esc clears them, only while there are any (else Esc is the focused widget's).
        Binding("ctrl+t", "toggle_mark", "Mark", id="toggle_mark", priority=True, show=False),
        Binding("escape", "clear_marks", "Clear marks", id="clear_marks"),
        # A fan-out is a new-session dialog for several (ctrl+f, beside ctrl+n); F9 compares the
        # attempts of the one on screen (shown only on an attempt).
        Binding("ctrl+f", "fan_out", "Fan out", id="fan_out", priority=True, show=False),
        Binding("f9", "compare", "Compare", id="compare"),
    ]

    def __init__(
        self,
        settings: Settings,
        catalog: AgentCatalog,
        engine: Engine,
        clock: Clock,
        *,
        remote: str | None,
        launch_folder: str,
        alert: Callable[[Alert], None],
    ) -> None:
        super().__init__()
        self.settings = settings
        self.catalog = catalog
        self.engine = engine
        self.remote = remote
        """The machine the engine runs on when it is another one (over SSH), else None."""
        self.clock = clock
        self._alert = alert
        """Rings and tells an alert (the app's: the terminal and the desktop are app-wide)."""
        self.attention = Attention()
        self.marks = Marks()
        """The sessions a prompt typed now goes to, when any are marked (ctrl+t)."""
        self.selected: str | None = None
        """The session on screen."""
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
        self._saved_selection: str | None = None
        """The session the user was on when the dashboard last quit, until first put on screen."""
        self._histories = False
        """Chats are shown with their rows: not before the first frame, which shows none (a row
        is drawn a frame later anyway), so that fetching them does not delay it."""
        self._recalled = False
        """Where the user was has been read back (once: before the engine starts, or at its start)."""
        self._ui_saved: UiState | None = None
        self._ui_save_timer: Timer | None = None
        self._ui_save_failed = False
        self._scroll_at_quit: dict[str, int] | None = None
        self._shown_where = ""
        """The machine the chat header names for the session on screen, as last drawn."""
        self._drafts_waiting: dict[str, str] = {}
        """Drafts saved for sessions of hosts not attached yet: given back as each appears, and
        kept in the saved state meanwhile (a host that is down must not cost a draft)."""
        self._recently_closed: list[ClosedSession] = []
        """Most recent last; each leaves after UNDO_SECONDS."""
        self.agents_found = AgentsFound(clock)  # for the demo's welcome
        self.first_folder: str | None = None
        """Where a first session works when none was saved: the folder polypilot started in
        (ui/launch.py says; None: its agent's own folder, where the engine runs)."""
        self.sidebar = SessionSidebar(id="sidebar")
        self.pane = ChatPane(id="chat-pane")
        self.new_session = NewSessionFlow(
            self,
            engine,
            default_agent=settings.default_agent,
            launch_folder=launch_folder,
            remote=remote is not None,
            recent=lambda: list(self._ui_state.recent_folders),
            made=self._made,
            closed=self._refocus_editor,
            host_of_selected=lambda: self.engine.host_of(self.selected) if self.selected else "",
        )
        self.review = ReviewFlow(self, engine, run=self._run, closed=self._refocus_editor)
        self.broadcaster = Broadcaster(
            self,
            engine,
            self.pane.editor,
            names=self._session_name,
            kept=self._ui_state_changed,
            unreachable=self._why_unreachable,
        )
        self.team = TeamFlow(self, engine, run=self._run, redraw=self._redraw_rows, closed=self._refocus_editor)
        self.compare = CompareFlow(self, engine, review=self.review, run=self._run, closed=self._refocus_editor)
        self.fan_out = FanOutFlow(
            self,
            engine,
            folders=self.new_session,
            made=self.compare.open,
            closed=self._refocus_editor,
        )

    @property
    def launch_folder(self) -> str:
        """The folder a new session starts in unless the user picks another (on another
        machine: the home folder there)."""
        return self.new_session.launch_folder

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        with Horizontal(id="main"):
            yield self.sidebar
            yield self.pane
        yield KeyFooter()

    # ---- start and end -------------------------------------------------------------------
    def on_screen_resume(self, event: events.ScreenResume) -> None:
        """The first resume, at start, restyles nothing: every widget was styled as it
        mounted, and one whose classes changed since was restyled then. Textual restyled the
        whole screen again (~10 ms of the first frame). A later resume is left as Textual asks
        (a theme changed under a dialog restyles every screen at once, not at its resume)."""
        if not self.stack_updates:  # Textual counts resumes after this handler (and suspends)
            event.refresh_styles = False  # read by Screen's own handler, which runs after this one

    def follow_engine(self) -> None:
        """Listen to what the screen shows (not raw agent events or actions: the views
        reflect those); before the engine starts, so no session is missed."""
        self._unsubscribe = self.engine.subscribe(
            self._on_engine_change, ViewChanged, ItemAdded, ItemReplaced, SessionAdded, SessionRemoved, HostChanged
        )

    def recall_where_the_user_was(self) -> None:
        """Read back where the user was, before the engine starts: the first redraw, which
        its snapshot may bring before :meth:`show_sessions`, opens that session, not the first
        one (whose history was fetched and drawn for nothing, on some starts). An engine in
        this process keeps its state only once started: read at :meth:`show_sessions` then."""
        if self.engine.persistent and not self._recalled:
            self._recalled = True
            self._ui_state, problem = load_ui_state(Path(self.settings.state_dir))
            if problem:
                self.notify(problem, title="Restore", severity="warning", timeout=10, markup=False)
            self._saved_selection = self._ui_state.selected

    async def show_sessions(self) -> None:
        """Once the engine has started: where the user was, or a first session, then the
        heartbeat and the first redraw."""
        self.recall_where_the_user_was()  # if not read before the engine started
        self.call_after_refresh(self.look_for_agents)  # for the welcome text: not the first frame's
        if not self.engine.ids():
            await self.start_first_session()
        elif self._ui_state.selected in self.engine.ids():
            self.select(self._ui_state.selected)
        self.set_interval(self.settings.heartbeat_seconds, self.heartbeat, name="heartbeat")
        self.call_after_refresh(self._show_histories)
        if self._redraw_posted or not self.redraws:
            # Now, unless the engine's start (its snapshot, its restore) was drawn already: what
            # it asked for is drawn here, before the screen's queue gets to it (the posted
            # redraw then finds it done); drawing 200 sessions twice delayed the listed frame.
            await self.flush()
        ids = set(self.engine.ids())
        self.pane.restore_drafts({k: v for k, v in self._ui_state.drafts.items() if k in ids})
        if self.engine.hosts():  # the hosts' sessions come as each host attaches: their drafts wait
            self._drafts_waiting = {k: v for k, v in self._ui_state.drafts.items() if k not in ids}
        self.pane.editor.focus()

    def _show_histories(self) -> None:
        """The first frame is drawn: the shown chat's rows now (fetched when not here yet)."""
        self._histories = True
        if self.selected is not None:
            self._redraw_rows({self.selected})

    def quitting(self) -> None:
        """The app is about to end: keep how far each chat is scrolled back now, while the chats
        still have their layout (read as the screen is torn down, a chat at its end reads as
        scrolled back). The rest is saved at unmount, once every key typed has reached its box."""
        self._scroll_at_quit = self._scroll_backs()

    def on_unmount(self) -> None:
        self._unsubscribe()
        self._save_ui_state(quitting=True)

    def _run(self, title: str, coro: Awaitable[Any]) -> None:
        """Run an engine call as a worker; a failure becomes a toast, never a crash."""

        async def guarded() -> None:
            if isinstance(done := await attempt(log, title, coro), Failed):
                self.notify(f"{title} failed: {done.said}", severity="error", markup=False)

        self.run_worker(guarded(), name=title, group="session-actions", exit_on_error=False)

    def _redraw_rows(self, session_ids: set[str]) -> None:
        self._dirty.update(session_ids)
        self._request_redraw()

    def _refocus_editor(self, _closed_with: object = None) -> None:
        """A dialog closed: typing goes to the prompt again."""
        self.pane.editor.focus()

    def host_down(self, session_id: str) -> HostView | None:
        """The host of a session when it is not live (None: this machine, or its host answers)."""
        name = self.engine.host_of(session_id)
        return next((host for host in self.engine.hosts() if host.name == name and not host.live), None)

    def _why_unreachable(self, session_id: str) -> str:
        """Why a verb on this session cannot reach its host now ("" when it can)."""
        host = self.host_down(session_id)
        return "" if host is None else host_problem(host, self.clock.now(), self.clock.wall())

    def _reachable(self, session_id: str | None) -> bool:
        """A verb on this session can reach its host now; else that is said at once (a verb
        would only fail against a host that does not answer, or wait for it)."""
        why = self._why_unreachable(session_id) if session_id else ""
        if not why:
            return True
        self.notify(
            why,
            title=self._session_name(session_id or ""),
            severity="warning",
            timeout=10,
            markup=False,
        )
        return False

    def _session_name(self, session_id: str) -> str:
        view = self._views.get(session_id)
        return view.name if view is not None else session_id

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
        scroll = self._scroll_at_quit if quitting and self._scroll_at_quit is not None else self._scroll_backs()
        live = set(self.engine.ids())
        drafts = {**self._drafts_waiting, **{sid: text for sid, text in self.pane.drafts().items() if sid in live}}
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

    def _scroll_backs(self) -> dict[str, int]:
        return {
            sid: back
            for sid in self.engine.ids()
            if (log_ := self.pane.log_for(sid)) is not None and (back := log_.scroll_back) > 0
        }

    # ---- redraws -------------------------------------------------------------------
    def _on_engine_change(self, record: Record) -> None:
        """The engine's record stream: mark the session dirty and post one EngineChanged (a
        host's change redraws its header and its rows, which every flush recomputes)."""
        if not isinstance(record, HostChanged):
            self._dirty.add(record.session_id)
        self._request_redraw()

    def _request_redraw(self) -> None:
        if self._redraw_posted:
            return
        self._redraw_posted = True
        if not self.post_message(EngineChanged()):
            self._redraw_posted = False  # the screen is closing: nothing to draw

    def on_engine_changed(self, message: EngineChanged) -> None:
        """In the screen's context: arm the coalesced redraw."""
        if not self.app.is_running or not self._redraw_posted:
            return  # not running, or a flush since it was posted drew what it asked for
        # At most one redraw per RENDER_INTERVAL: a stream of deltas from 20 sessions costs
        # ~20 redraws a second, not one per event (the screen cannot show more anyway).
        wait = self._last_flush + RENDER_INTERVAL - self.clock.now()
        if wait > 0:
            self.set_timer(wait, self._flush_posted, name="coalesced redraw")
        else:
            self.call_later(self._flush_posted)

    async def _flush_posted(self) -> None:
        """The coalesced redraw: none when a flush since drew what it was armed for (a flush
        made directly, the heartbeat's, left the timer to redraw every row again for nothing)."""
        if self._redraw_posted:
            await self.flush()

    async def heartbeat(self) -> None:
        """Refresh "ago" labels, repair a lost redraw (flushes directly, never via the guard),
        and save where the user is when it changed."""
        await self.flush()
        self.compare.changed(self._views)  # its times run on
        self._save_ui_state()

    async def flush(self) -> None:
        """Redraw what changed since the last flush (one flush at a time)."""
        async with self._flush_lock:
            self._redraw_posted = False  # changes from here on post a new EngineChanged
            if not self.is_running or not self.app.is_running or not self.app.screen_stack:
                return  # a coalesced redraw that came due while the app was shutting down
            await self._flush_views()

    async def _flush_views(self) -> None:
        self._last_flush = self.clock.now()
        self.redraws += 1
        dirty, self._dirty = self._dirty, set()
        views = self.engine.views()
        hosts = self.engine.hosts()
        host_of = {view.id: self.engine.host_of(view.id) for view in views} if hosts else {}
        now = self.clock.now()
        current = {view.id: view for view in views}
        for view in views:
            before = self._views.get(view.id)
            if before != view:
                on_screen = view.id == self.selected and self.app.app_focus
                alert = self.attention.observe(before, view, on_screen=on_screen)
                if alert is not None and self.engine.alerts_here():  # else another dashboard rings
                    host = host_of.get(view.id, "")
                    self._alert(replace(alert, title=f"{host} · {alert.title}") if host else alert)
        if self.marks.keep_only(current):
            self.refresh_bindings()  # the last mark may have left with its session
        for gone in set(self._views) - set(current):
            self.attention.forget(gone)
            await self.pane.forget(gone)
        previous = self._views
        self._views = current
        if self._drafts_waiting and (arrived := self._drafts_waiting.keys() & current.keys()):
            self.pane.restore_drafts({sid: self._drafts_waiting.pop(sid) for sid in arrived})
        self.team.changed(views, previous)
        if self.selected not in current:
            # Where the user was, once it is here (a redraw before it came, a fleet host's, keeps it).
            saved = self._saved_selection if self._saved_selection in current else None
            self.selected = saved or (views[0].id if views else None)
            self._saved_selection = None if saved else self._saved_selection
            self.pane.bind(self.selected)
        if self.selected is not None:
            self.attention.seen(self.selected)
        marked, queued = self.marks.ids, self.team.queued
        needy = {v.id for v in views if self.attention.wants_user(v)}
        await self.sidebar.sync(
            views,
            now,
            self.attention.unread,
            self.selected,
            marked=marked,
            queued=queued,
            hosts=hosts,
            host_of=host_of,
            needy=needy,
            wall_now=self.clock.wall(),
        )
        self.compare.changed(dirty)
        self.pane.show_broadcast(len(self.marks))
        shown = current.get(self.selected) if self.selected else None
        where = self._where(shown.id, hosts, host_of, now) if shown is not None and hosts else ""
        machine = host_of.get(shown.id, "") if shown is not None else ""
        if machine and self.agents_found.due(machine) and any(h.name == machine and h.live for h in hosts):
            self.look_for_agents(machine)
        if shown is None:
            await self.pane.show(None, (), "", now)
        elif (
            self.selected in dirty
            or previous.get(shown.id) != shown
            or self.pane.session_id != shown.id
            or ((log := self.pane.log_for(shown.id)) is not None and log.shows_unreadable)  # until read
            or where != self._shown_where  # its host went down or came back
        ):
            history = self.engine.history(shown.id) if self._histories else ()
            await self.pane.show(
                shown,
                history,
                self.engine.streaming_text(shown.id),
                now,
                self.agents_found.empty_text(shown, self.catalog, machine),
                where,
            )
            self._shown_where = where
            if history and shown.id in self._ui_state.scroll_back:  # once its rows are there to scroll
                self.pane.scroll_back(shown.id, self._ui_state.scroll_back.pop(shown.id))
        else:
            self.pane.tick(shown, now)
        if self.is_current and self.focused is None:
            self.pane.editor.focus()  # e.g. the permission buttons that had focus went away
        count = f"{len(views)} session{'' if len(views) == 1 else 's'}"
        spent = fleet_summary(fleet_usage(v.usage for v in views))  # what the whole fleet used
        self.sub_title = (
            count
            + (f" · {len(needy)} need{'s' if len(needy) == 1 else ''} you" if needy else "")
            + (f" · on {self.remote}" if self.remote else "")
            + (f" · {machines(hosts)}" if hosts else "")
            + (f" · {spent}" if spent else "")
        )
        state = (self.selected, shown.status if shown else None, bool(shown and shown.interrupted_prompt))
        if state != self._binding_state:
            self._binding_state = state
            self.refresh_bindings()

    def _where(self, session_id: str, hosts: Sequence[HostView], host_of: dict[str, str], now: float) -> str:
        """The machine a session runs on, for its chat header: ``ci``, ``ci (stale since 14:02)``
        ("" this machine)."""
        name = host_of.get(session_id, "")
        host = next((h for h in hosts if h.name == name), None) if name else None
        if host is None:
            return ""
        return name if host.live else f"{name} ({host_state(host, now, self.clock.wall())})"

    def look_for_agents(self, host: str = "") -> None:
        """Ask ``host``'s engine which agents it can start (the demo's welcome names them): Local's
        at start, a host's when one of its sessions is first shown. One worker per host, marked
        asked at once: two redraws before the answer start one call."""
        asked = self.agents_found.look(self.engine.member(host), host)
        self.run_worker(self._agents_answer(asked), group=f"agents-{host}", exclusive=True, exit_on_error=False)

    async def _agents_answer(self, asked: Awaitable[bool]) -> None:
        if await asked:  # a failure changes nothing shown: no redraw
            self._dirty.update(self.engine.ids())
            self._request_redraw()

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
        self._saved_selection = None  # a session chosen: where the user was last time is no more
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
        ids = self.sidebar.session_list.session_ids or list(self._views) or self.engine.ids()  # as listed
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

    # ---- prompts and the queue -------------------------------------------------------
    def on_prompt_editor_submitted(self, event: PromptEditor.Submitted) -> None:
        event.stop()
        sid = event.session_id
        if sid is None or sid not in self.engine.ids():
            # Nothing to send to (closed meanwhile): the text goes back, never lost.
            self.pane.editor.insert(event.text)
            self.notify("No session to send to: press ctrl+n to start one.", severity="warning")
            return
        targets = self.marks.in_order(self.sidebar.session_list.session_ids)
        if not targets and not self._reachable(sid):  # its host does not answer: the text stays, nothing waits
            self.pane.editor.give_back(sid, event.text)
            self._ui_state_changed()
            return
        if (log_ := self.pane.log_for(sid)) is not None:
            log_.follow_end()  # whoever sends wants to see what comes back
        if targets:
            self._run("Broadcast", self._broadcast(sid, targets, event.text))
        else:
            self._run("Send", self._send(sid, event.text))

    async def _broadcast(self, typed_for: str, targets: list[str], text: str) -> None:
        took = await self.broadcaster.send(typed_for, targets, text)
        if took and len(took) < len(targets):  # a second Enter must not send it again to those that took it
            self.marks.unmark(took)
            self._marks_changed()

    async def _send(self, session_id: str, text: str) -> None:
        result = await attempt(log, "Send", self.engine.call(verbs.SEND, verbs.Send(session_id, text)))
        if isinstance(result, Failed):  # refused or failed: said, and the text is not lost
            self.pane.editor.give_back(session_id, text)
            self._ui_state_changed()
            self.notify(
                f"Send failed: {result.said}. Your text is back in the prompt.",
                title=self._session_name(session_id),
                severity="error",
                timeout=15,
                markup=False,
            )
            return
        if result == "queued" and session_id != self.selected:
            self.notify(
                "Queued: it is sent when the current turn ends.",
                title=self._session_name(session_id),
                timeout=4,
                markup=False,
            )

    # ---- marks for a broadcast -----------------------------------------------------------
    def action_toggle_mark(self) -> None:
        """Mark the session on screen for a broadcast, or unmark it."""
        sid = self.selected
        if sid is None or sid not in self._views:
            return
        if sid not in self.marks and self.marks.full:
            self.notify(
                f"{self.marks.limit} sessions are marked, as many as one broadcast reaches.",
                severity="warning",
                timeout=5,
                markup=False,
            )
            return
        self.marks.toggle(sid)
        self._marks_changed()

    def action_clear_marks(self) -> None:
        """Unmark every session: prompts go to the session on screen again."""
        if self.marks.clear():
            self._marks_changed()

    def _marks_changed(self) -> None:
        self._request_redraw()  # the rows' ✓ and the sidebar's count
        self.pane.show_broadcast(len(self.marks))  # now: the next Enter goes where this says
        self.refresh_bindings()

    def on_queue_panel_edit(self, event: QueuePanel.Edit) -> None:
        event.stop()
        self._run("Edit", self._edit_queued(event))

    async def _edit_queued(self, event: QueuePanel.Edit) -> None:
        prompt = await self.engine.call(verbs.UNQUEUE, verbs.Unqueue(event.session_id, event.index, event.key))
        if prompt is None:
            self.notify("That prompt was already sent.", timeout=3)
            return
        editor = self.pane.editor
        if editor.session_id != event.session_id:  # another session is on screen: its draft keeps it
            editor.give_back(event.session_id, prompt)
            self._ui_state_changed()
            return
        editor.load_text(prompt if not editor.text.strip() else f"{editor.text.rstrip()}\n\n{prompt}")
        editor.move_cursor(editor.document.end)
        editor.focus()

    def on_queue_panel_drop(self, event: QueuePanel.Drop) -> None:
        event.stop()
        self._run("Drop", self._drop_queued(event))
        self.pane.editor.focus()

    async def _drop_queued(self, event: QueuePanel.Drop) -> None:
        prompt = await self.engine.call(verbs.UNQUEUE, verbs.Unqueue(event.session_id, event.index, event.key))
        if prompt is not None:
            self.notify(f"Dropped: {one_line(prompt, 60)}", timeout=3, markup=False)

    def on_queue_panel_send_next(self, event: QueuePanel.SendNext) -> None:
        event.stop()
        self._run("Send", self.engine.call(verbs.SEND_QUEUED, verbs.SessionRef(event.session_id)))
        self.pane.editor.focus()

    def on_queue_panel_clear(self, event: QueuePanel.Clear) -> None:
        event.stop()
        self._run("Clear queue", self._clear_queue(event.session_id))
        self.pane.editor.focus()

    async def _clear_queue(self, session_id: str) -> None:
        dropped = await self.engine.call(verbs.CLEAR_QUEUE, verbs.SessionRef(session_id))
        if dropped:
            self.notify(f"Dropped {plural(dropped, 'queued prompt')}.", timeout=3, markup=False)

    def action_send_queued(self) -> None:
        """Send the selected session's held queue (its next prompt goes out now)."""
        if self.selected and self._reachable(self.selected):
            self._run("Send", self.engine.call(verbs.SEND_QUEUED, verbs.SessionRef(self.selected)))

    # ---- permissions and attention ---------------------------------------------------
    def on_permission_prompt_answered(self, event: PermissionPrompt.Answered) -> None:
        event.stop()
        if event.session_id is not None and self._reachable(event.session_id):
            answer = verbs.AnswerPermission(event.session_id, event.request_id, event.option_id)
            self._run("Permission answer", self.engine.call(verbs.ANSWER_PERMISSION, answer))
        self.pane.editor.focus()

    def on_permission_prompt_leave(self, event: PermissionPrompt.Leave) -> None:
        self.pane.editor.focus()

    async def action_attention(self) -> None:
        """Answer the session on screen if it waits for permission, else go to the next one
        needing you: sessions blocked on a permission first, then the rest, in sidebar order.

        Awaited to the end (the permission drawn and focused) before the next key is read,
        so the "y" of a quick ctrl+g, y answers instead of landing in the prompt.
        """
        views = {view.id: view for view in self.engine.views()}  # now, not as last drawn
        view = views.get(self.selected or "")
        prompt = self.pane.permission
        if view is not None and view.pending_permission is not None and not prompt.has_focus_within:
            await self.flush()
            prompt.focus_first()
            return
        ids = list(views)
        start = ids.index(self.selected) + 1 if self.selected in ids else 0
        needy = [
            sid for sid in ids[start:] + ids[:start] if sid != self.selected and self.attention.wants_user(views[sid])
        ]
        if not needy:
            self.notify("No other session needs your attention.", timeout=3)
            return
        sid = min(needy, key=lambda s: views[s].pending_permission is None)  # stable: order kept
        self.select(sid)
        if views[sid].pending_permission is not None:
            await self.flush()
            self.pane.permission.focus_first()

    # ---- turn control --------------------------------------------------------------
    def action_stop(self) -> None:
        """Stop the selected session's turn (abort, then kill if it does not stop); an
        orchestrator's workers too, when the user says so."""
        view = self._views.get(self.selected or "")
        if view is None or not self._reachable(view.id):
            return
        if view.status.busy:
            self._run("Stop", self.engine.call(verbs.STOP, verbs.SessionRef(view.id)))
        workers = self._workers_of(view.id)
        if view.orchestrator and workers:
            self.team.offer_to_stop_workers(view, workers)

    def _workers_of(self, session_id: str) -> list[SessionView]:
        return [v for v in self._views.values() if v.parent == session_id]

    def action_orchestrate(self) -> None:
        """Make the selected session an orchestrator: its agent is handed the team's tools."""
        sid = self.selected
        if sid is not None and sid in self._views:
            self.team.orchestrate(sid, self._session_name(sid))

    def action_reconnect(self) -> None:
        """Reconnect the selected session's agent, keeping its history."""
        if self.selected and self._reachable(self.selected):
            self._run("Reconnect", self.engine.call(verbs.RECONNECT, verbs.SessionRef(self.selected)))

    def action_resend_interrupted(self) -> None:
        """Resend the prompt of a turn lost to a restart, a quit, a dead agent or a reconnect."""
        if self.selected and self._reachable(self.selected):
            self._run("Resend", self.engine.call(verbs.RESEND, verbs.SessionRef(self.selected)))

    def busy_selected(self) -> bool:
        """The session on screen runs a turn (ctrl+c's hint names the key that stops it)."""
        view = self._views.get(self.selected or "")
        return view is not None and view.status.busy

    # ---- close and undo ------------------------------------------------------------
    def action_close_session(self) -> None:
        """Close the selected session (after a confirmation; undo for 30 s)."""
        sid = self.selected
        if sid is None or not self._reachable(sid):
            return
        view = self._views.get(sid)
        running = " Its running turn is stopped." if view is not None and view.status.busy else ""
        message = (
            f"“{one_line(self._session_name(sid), 60)}” leaves the list and its agent is stopped.{running} "
            f"Its history is deleted unless you undo within {UNDO_SECONDS:.0f} s (ctrl+z)."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._run("Close", self._close(sid))
            self.pane.editor.focus()

        from polypilot_tui.ui.screens.confirm import ConfirmScreen  # dialogs: imported when first opened

        self.app.push_screen(ConfirmScreen("Close this session?", message, "Close session"), answered)

    async def _close(self, session_id: str) -> None:
        draft = self.pane.drafts().get(session_id, "")
        ids = self.engine.ids()
        if self.selected == session_id and len(ids) > 1:
            index = ids.index(session_id)
            self.select(ids[index + 1] if index + 1 < len(ids) else ids[index - 1])  # its neighbour
        name = self._session_name(session_id)
        if not await self.engine.call(verbs.CLOSE, verbs.SessionRef(session_id)):
            return
        closed = ClosedSession(session_id, name, draft)
        self._recently_closed.append(closed)
        self.set_timer(UNDO_SECONDS, lambda: self._expire(closed), name="undo close")
        self.notify(
            f"Closed “{one_line(name, 40)}”. ctrl+z brings it back for {UNDO_SECONDS:.0f} s.",
            timeout=8,
            markup=False,
        )

    def _expire(self, closed: ClosedSession) -> None:
        if closed in self._recently_closed:
            self._recently_closed.remove(closed)
            self.refresh_bindings()

    def action_undo_close(self) -> None:
        """Bring back the session closed last (within 30 s), history and draft included."""
        if not self._recently_closed:
            return
        closed = self._recently_closed.pop()
        self._run("Undo", self._reopen(closed))

    async def _reopen(self, closed: ClosedSession) -> None:
        await self.engine.call(verbs.REOPEN, verbs.Reopen(closed.session_id))
        if closed.draft:
            self.pane.restore_drafts({closed.session_id: closed.draft})
        self.select(closed.session_id)
        self.notify(f"“{one_line(closed.name, 40)}” is back.", timeout=4, markup=False)

    # ---- copy and details ----------------------------------------------------------
    def action_copy_reply(self) -> None:
        """Copy the selected session's last reply to the clipboard (OSC 52: works over SSH)."""
        sid = self.selected
        if sid is None:
            return
        streaming = self.engine.streaming_text(sid)
        text = streaming or next(
            (item.text for item in reversed(self.engine.history(sid)) if item.kind is ItemKind.ASSISTANT), ""
        )
        if not text:
            self.notify("No reply to copy yet.", timeout=3)
            return
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied the last reply ({len(text):,} characters).", timeout=3)

    def action_details(self) -> None:
        """Show the selected session's details: agent, folder, command, logs, stderr tail (on a
        host that does not answer: why, in full)."""
        if self.selected and self._reachable(self.selected):
            self._run("Details", self._show_details(self.selected))

    async def _show_details(self, session_id: str) -> None:
        details = await self.engine.call(verbs.DETAILS, verbs.SessionRef(session_id))
        from polypilot_tui.ui.screens.details import SessionDetailsScreen

        self.app.push_screen(SessionDetailsScreen(details), self._refocus_editor)

    # ---- the dialogs ---------------------------------------------------------------
    def action_new_session(self) -> None:
        """Pick an agent, a folder, a name and (in git) a worktree, and start a session."""
        self.new_session.open()

    def _made(self, sid: str, folder: str | None) -> None:
        """A session made in the dialog: on screen, its folder remembered (on this machine)."""
        self.select(sid)
        if folder is not None:
            self._ui_state.recent_folders = remember_folder(self._ui_state.recent_folders, folder)
            self._ui_state_changed()
        self.pane.editor.focus()

    def action_rename_session(self) -> None:
        """Give the selected session another name."""
        sid = self.selected
        if sid is None or sid not in self.engine.ids() or not self._reachable(sid):
            return

        def answered(name: str | None) -> None:
            if name is not None and sid in self.engine.ids():
                self._run("Rename", self.engine.call(verbs.RENAME, verbs.Rename(sid, name)))
            self.pane.editor.focus()

        from polypilot_tui.ui.screens.rename import RenameScreen

        self.app.push_screen(RenameScreen(self.engine.view(sid).name), answered)

    def action_switch_model(self) -> None:
        """List the selected session's models and switch it to the one picked (F8)."""
        sid = self.selected
        if sid is None or sid not in self.engine.ids() or not self._reachable(sid):
            return

        def answered(model_id: str | None) -> None:
            if model_id is not None:
                self.notify(f"Model: {model_id} (from the next turn).", timeout=3, markup=False)
            self.pane.editor.focus()

        from polypilot_tui.ui.screens.model_picker import ModelPickerScreen

        screen = ModelPickerScreen(
            self.engine.view(sid).name,
            lambda: self.engine.call(verbs.MODELS, verbs.SessionRef(sid)),
            lambda model_id: self.engine.call(verbs.SET_MODEL, verbs.SetModel(sid, model_id)),
        )
        self.app.push_screen(screen, answered)

    def action_finish_session(self) -> None:
        """Commit, merge, push, open a pull request for or discard the selected session's worktree."""
        sid = self.selected
        if sid is None or sid not in self.engine.ids() or not self._reachable(sid):
            return
        session = self.engine.view(sid)
        workspace = session.workspace
        from polypilot_tui.ui.finish_actions import FinishActions
        from polypilot_tui.ui.screens.finish import FinishScreen

        actions = FinishActions(self.engine, sid, workspace) if workspace is not None and workspace.owned else None
        screen = FinishScreen(session.name, workspace, actions)

        def closed(_result: object) -> None:
            if screen.discarded and sid in self.engine.ids():
                self.notify(
                    f"The worktree of {session.name!r} is removed: the session takes no more prompts "
                    "(its agent would work in a deleted folder); its conversation stays. "
                    "Close it with ctrl+p → Close session when you no longer need it.",
                    timeout=8,
                    markup=False,
                )
            self.pane.editor.focus()

        self.app.push_screen(screen, closed)

    def action_fan_out(self) -> None:
        """One task to several new sessions (a mix of agents), each in a worktree; then compare them."""
        self.fan_out.open()

    def action_compare(self) -> None:
        """The attempts of the fan-out the selected session is part of, side by side (F9)."""
        view = self._views.get(self.selected or "")
        if view is not None and view.attempt_of and self._reachable(view.id):
            self.compare.open(view.attempt_of)

    def action_review_changes(self) -> None:
        """The selected session's changes against its base, to read and comment on (ctrl+o)."""
        if self.selected is not None and self._reachable(self.selected):
            self.review.open(self.selected)

    # ---- which keys apply now, and the command palette ------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        view = self._views.get(self.selected or "")
        if action == "stop":
            stoppable = view is not None and (view.status.busy or (view.orchestrator and self._workers_of(view.id)))
            return True if stoppable else None
        if action in ("reconnect", "details", "copy_reply", "rename_session", "finish_session", "switch_model"):
            return True if view is not None else None
        if action == "resend_interrupted":
            return view is not None and bool(view.interrupted_prompt)
        if action == "undo_close":
            return bool(self._recently_closed)
        if action == "send_queued":
            return view is not None and bool(view.queue)
        if action == "compare":
            return view is not None and bool(view.attempt_of)
        if action == "toggle_mark":
            return True if view is not None else None
        if action == "clear_marks":
            return bool(self.marks)  # else Esc is the focused widget's
        return True

    def commands(self) -> Iterator[SystemCommand]:
        """Every session action for the command palette, with its key in the help text."""
        yield SystemCommand(
            "New session", "Start a session: agent, folder, name, worktree (ctrl+n)", self.action_new_session
        )
        yield SystemCommand("Stop session", "Stop the selected session's turn (ctrl+x)", self.action_stop)
        yield SystemCommand(
            "Reconnect session", "Reconnect the selected session's agent (ctrl+r)", self.action_reconnect
        )
        yield SystemCommand("Next session", "Select the next session (ctrl+down)", self.action_next_session)
        yield SystemCommand("Previous session", "Select the previous session (ctrl+up)", self.action_previous_session)
        yield SystemCommand(
            "Jump to attention", "Go to the next session that needs you (ctrl+g)", self.action_attention
        )
        yield SystemCommand(
            "Resend interrupted prompt", "Resend a prompt lost to a restart (ctrl+y)", self.action_resend_interrupted
        )
        yield SystemCommand(
            "Close session",
            "Stop and remove the selected session (asks; undo with ctrl+z for 30 s)",
            self.action_close_session,
        )
        yield SystemCommand("Undo close", "Bring back the session closed last (ctrl+z)", self.action_undo_close)
        yield SystemCommand(
            "Fan out a task…",
            "One task to several new sessions, each in a worktree; compare, merge the best (ctrl+f)",
            self.action_fan_out,
        )
        yield SystemCommand(
            "Compare attempts", "The fan-out of the selected session, side by side (F9)", self.action_compare
        )
        yield SystemCommand(
            "Review changes",
            "The selected session's diff against its base; comment and send a review (ctrl+o)",
            self.action_review_changes,
        )
        yield SystemCommand("Rename session", "Give the selected session another name (F4)", self.action_rename_session)
        yield SystemCommand(
            "Finish session…",
            "Commit, merge, push, open a pull request for or discard its worktree (F5)",
            self.action_finish_session,
        )
        yield SystemCommand(
            "Switch model…", "List the selected session's models and switch (F8)", self.action_switch_model
        )
        yield SystemCommand("Session details", "Agent, folder, command, logs and stderr tail (F2)", self.action_details)
        yield SystemCommand(
            "Copy last reply", "Copy the selected session's last reply to the clipboard (F3)", self.action_copy_reply
        )
        yield SystemCommand(
            "Send queued prompts", "Release the held queue: its prompts go out in order", self.action_send_queued
        )
        yield SystemCommand(
            "Mark session",
            "Mark or unmark the selected session: a prompt then goes to every marked one (ctrl+t)",
            self.action_toggle_mark,
        )
        yield SystemCommand("Clear marks", "Unmark every session (Esc)", self.action_clear_marks)
        yield SystemCommand(
            "Make orchestrator",
            "The selected session can start, wait for and stop workers through its polypilot tools",
            self.action_orchestrate,
        )
