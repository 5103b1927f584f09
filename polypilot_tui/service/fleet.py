"""FleetEngine: the local engine and one engine per host, as one :class:`~polypilot_tui.engine.api.Engine`.

Each host is a :class:`SshMember`: a :class:`~polypilot_tui.service.remote.RemoteEngine` over
its own :class:`~polypilot_tui.service.attach.SshAttach` forward (the user's ssh, config, keys
and agent; nothing stored), watched by a task of its own. Nothing remote runs on the
dashboard's path: reads are answered from each member's mirror, connects and pings are tasks
with bounds, and a call to a host that is not live fails at once (:class:`HostDown`).

A host that stops answering is marked ``stale`` within :data:`PING_EVERY` + :data:`PING_TIMEOUT`
seconds (at once when its ssh ends), its sessions stay listed as last seen, and it is retried
with the domain's backoff (domain/hosts.py); when it answers again its snapshot replaces them.
Sessions keep their ids (8 hex of a uuid4): the fleet routes by ``session id -> host``; an id
two hosts both hold is told, and only the first host's session is listed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.clock import Clock
from polypilot_tui.domain.fan_out import BroadcastResult
from polypilot_tui.domain.hosts import (
    LOCAL,
    Backoff,
    HostEntry,
    HostHealth,
    HostState,
    HostView,
    classify_failure,
    other_version_reason,
)
from polypilot_tui.domain.records import HostChanged, Record, SessionAdded, SessionRemoved
from polypilot_tui.domain.text import clip
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine.api import Engine, EngineError, UnknownGroup, Verb
from polypilot_tui.engine.stream import Listener, RecordStream, Unsubscribe
from polypilot_tui.engine.verbs import API_VERSION, ENGINE_INFO, Broadcast, NoArgs
from polypilot_tui.service.attach import SshAttach
from polypilot_tui.service.client import EngineClient, EngineUnreachable
from polypilot_tui.service.remote import RemoteEngine
from polypilot_tui.service.ssh import TunnelError, clean_stale_forwards
from polypilot_tui.storage.notices import Notice, NoticeBoard, NoticeListener

log = logging.getLogger(__name__)

Q = TypeVar("Q")
R = TypeVar("R")

CONNECT_TIMEOUT = 15.0
"""Seconds one try at a host may take (ssh, the engine's start there, its first answer)."""
PING_EVERY = 1.5
"""Seconds between two asks of a live host's engine whether it is there."""
PING_TIMEOUT = 2.5
"""Seconds a live host's engine has to answer a ping before the host is marked stale."""
CLOSE_TIMEOUT = 5.0
"""Seconds a host's detach may take (its forward ends whatever happens)."""
CLOCK_SLACK = 0.05
"""A host's clock this close to the fleet's is taken as the same (no view translated)."""
_TIMES = ("turn_started_at", "last_activity_at", "gives_up_at")
"""The fields of a SessionView read against its engine's clock."""
NOTICE_CHARS = 2000
"""Characters of a host's notice shown at most (the rest cut, marked "…")."""
NOTICE_KEY_CHARS = 200
_QUIET_NOTICES = ("engine-lost", "engine-stopped")
"""A host's notices its HostView says already."""


class HostDown(EngineError):
    """The session's host is not live: nothing was sent (the message names it and says why)."""

    status = 503


class OtherVersion(Exception):
    """The host's engine speaks another API version (the message says which, and the fix)."""


class Member(Protocol):
    """One host of a fleet: its engine, its health, and the task that keeps it attached."""

    name: str
    engine: Engine
    health: HostHealth

    async def run(self, changed: Callable[[], None]) -> None:
        """Attach and keep attached until cancelled; ``changed()`` after each change of health."""

    async def close(self, stop_engine: bool) -> None:
        """Leave (bounded): the forward ends, the engine there goes on unless ``stop_engine``."""


class SshMember:
    """A host over ssh: tries with backoff, pings while live, marks a loss, tries again."""

    def __init__(
        self,
        entry: HostEntry,
        clock: Clock,
        *,
        ssh_options: Sequence[str] = (),
        connect_timeout: float = CONNECT_TIMEOUT,
        ping_every: float = PING_EVERY,
        ping_timeout: float = PING_TIMEOUT,
        backoff: Backoff | None = None,
    ) -> None:
        self.name = entry.name
        self.entry = entry
        self._clock = clock
        self._ping_every = ping_every
        self._ping_timeout = ping_timeout
        self.health = HostHealth(entry.name, entry.target, clock, backoff)
        self.attach = SshAttach(
            entry.target, entry.remote_command, (*ssh_options, *entry.ssh_options), timeout=connect_timeout
        )
        self.remote = RemoteEngine(
            self._connect, on_detach=self.attach.close, on_attached=self._attached, quiet_loss=True
        )
        self.engine: Engine = self.remote
        self._changed: Callable[[], None] = lambda: None
        self._pinger: EngineClient | None = None
        self._tries = 0
        """Connects that returned a socket: one more call of ``_connect`` means the last was lost."""
        self._closing = False

    def _set(self, view: HostView) -> None:
        log.info("host %s: %s %s", self.name, view.state, view.reason)
        self._changed()

    # ---- the RemoteEngine's connect: tries until one works, each bounded ------------------------
    async def _connect(self) -> Path:
        if self._tries and self.health.view.state is HostState.LIVE:
            self._set(self.health.lost(self._loss()))
        while True:
            wait = self.health.wait()
            if wait > 0:
                await self._clock.sleep(wait)
            self._set(self.health.connecting())
            try:
                path = await self.attach.connect()
                await self._check_version(path)
            except TunnelError as exc:
                state, reason = classify_failure(str(exc))
                self._set(self.health.failed(reason, state))
                continue
            except OtherVersion as exc:
                await self.attach.close()
                self._set(self.health.failed(str(exc), HostState.OTHER_VERSION))
                continue
            except (EngineError, OSError, TimeoutError) as exc:
                await self.attach.close()
                self._set(self.health.failed(f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)))
                continue
            self._tries += 1
            return path

    def _loss(self) -> str:
        tunnel = self.attach.tunnel
        if tunnel is not None and not tunnel.alive():
            said = tunnel.last_error()
            return f"the ssh connection ended{': ' + said if said else ''}"
        return "its engine's stream ended"

    async def _check_version(self, path: Path) -> None:
        """The engine at ``path`` speaks our API (OtherVersion otherwise); it is pinged from here."""
        if self._pinger is not None:
            await self._pinger.aclose()
        self._pinger = EngineClient(path, timeout=self._ping_timeout)
        try:
            async with asyncio.timeout(self._ping_timeout * 2):
                info = await self._pinger.call(ENGINE_INFO, NoArgs())
        except EngineUnreachable:
            raise  # slow or gone: a failure to retry, not another version
        except EngineError as exc:  # an engine that does not know /v1/engine, or answers it otherwise
            raise OtherVersion(f"{other_version_reason(None, API_VERSION)} ({exc})") from None
        if info.api != API_VERSION:
            raise OtherVersion(other_version_reason(info.api, API_VERSION))

    def _attached(self) -> None:
        self._set(self.health.live())

    # ---- the watch ------------------------------------------------------------------------------
    async def run(self, changed: Callable[[], None]) -> None:
        self._changed = changed
        # Until closed: a cancel alone is not trusted to end it (asyncio.wait_for in 3.11 can
        # swallow one that lands as its awaitable finishes, and a detach then waited forever).
        while not self._closing:
            if not self.remote.reading() and not self._closing:
                try:
                    await self.remote.start()  # its connect tries until a host answers
                except Exception as exc:  # noqa: BLE001 - the watch goes on whatever a try raised
                    # Connected, then no snapshot (a stream ended early, one that does not read):
                    # a failure like any other, so the backoff applies and the reason is shown.
                    log.info("host %s: attach: %s", self.name, exc)
                    self._set(self.health.failed(str(exc) or type(exc).__name__))
                    await self.attach.close()
            if self.health.view.state is HostState.LIVE:
                await self._ping()
            await self._clock.sleep(self._ping_every)

    async def _ping(self) -> None:
        pinger = self._pinger
        if pinger is None:
            return
        try:
            async with asyncio.timeout(self._ping_timeout):
                await pinger.call(ENGINE_INFO, NoArgs())
        except (EngineError, OSError, TimeoutError) as exc:
            if self.health.view.state is not HostState.LIVE:
                return  # marked meanwhile (its stream ended first)
            why = str(exc) if not isinstance(exc, TimeoutError) else f"no answer within {self._ping_timeout:g} s"
            self._set(self.health.lost(f"{self._loss()}; {why}" if self._loss() else why))
            # The stream may hang as long as the link does: ending the forward ends it, and the
            # RemoteEngine calls connect, which tries again with backoff.
            await self.attach.close()
            return
        self.health.seen()

    async def close(self, stop_engine: bool) -> None:
        self._closing = True
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await self.remote.detach(stop_engine)
        except (TimeoutError, EngineError, OSError) as exc:
            log.warning("host %s: detach: %s", self.name, exc)
        finally:
            await self.attach.close()
            if self._pinger is not None:
                await self._pinger.aclose()


class FleetEngine:
    """``local`` and ``members`` as one engine (docs/fleet.md, "For front ends")."""

    def __init__(self, local: Engine, members: Sequence[Member]) -> None:
        self.local = local
        self._members: dict[str, Member] = {}
        for member in members:
            if member.name == LOCAL or member.name in self._members:
                raise ValueError(f"host {member.name!r} given twice (or named like Local)")
            self._members[member.name] = member
        self._stream = RecordStream()
        self.notices = NoticeBoard()
        self._owner: dict[str, str] = {}
        """Session id -> the host that lists it."""
        self._groups: dict[str, str] = {}
        """Fan-out group -> the host that knows it (learned when asked)."""
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._local_view = HostView(LOCAL, "", HostState.LIVE, since=local.clock.now())
        self._unsubscribe = [local.subscribe(self._relay(LOCAL))]
        self._unsubscribe.append(local.on_notice(self.notices.emit))
        for name, member in self._members.items():
            self._unsubscribe.append(member.engine.subscribe(self._relay(name)))
            self._unsubscribe.append(member.engine.on_notice(self._host_notice(name)))

    @property
    def clock(self) -> Clock:
        return self.local.clock

    @property
    def separate(self) -> bool:
        return True

    @property
    def persistent(self) -> bool:
        return self.local.persistent

    # ---- machines ---------------------------------------------------------------------------------
    def hosts(self) -> tuple[HostView, ...]:
        local = dataclasses.replace(self._local_view, sessions=sum(1 for o in self._owner.values() if o == LOCAL))
        counts = dict.fromkeys(self._members, 0)
        for owner in self._owner.values():
            if owner:
                counts[owner] = counts.get(owner, 0) + 1
        return (local, *(m.health.counted(counts[name]) for name, m in self._members.items()))

    def host_of(self, session_id: str) -> str:
        owner = self._owner.get(session_id)
        if owner is not None:
            return owner
        for name, engine in self._engines():
            if session_id in engine.ids():
                self._owner[session_id] = name
                return name
        return LOCAL

    def member(self, host: str) -> Engine:
        if host == LOCAL:
            return self.local
        return self._members[host].engine

    def _engines(self) -> Iterable[tuple[str, Engine]]:
        yield LOCAL, self.local
        for name, member in self._members.items():
            yield name, member.engine

    # ---- the records: every member's, one stream -----------------------------------------------
    def _relay(self, host: str) -> Listener:
        def relay(change: Record) -> None:
            if isinstance(change, SessionAdded) and not self._claim(host, change.session_id):
                return
            if isinstance(change, SessionRemoved):
                if self._owner.get(change.session_id, host) != host:
                    return  # the hidden twin of another host's session
                self._owner.pop(change.session_id, None)
            elif change.session_id and self._owner.get(change.session_id, host) != host:
                return
            self._stream.publish(change)

        return relay

    def _claim(self, host: str, sid: str) -> bool:
        """``sid`` is ``host``'s now, unless another host lists it (told, and False)."""
        owner = self._owner.get(sid)
        if owner is not None and owner != host and sid in self.member(owner).ids():
            self.notices.tell(
                f"fleet-collision-{sid}",
                f"Session id {sid} is on {_label(owner)} and on {_label(host)}: only the one on "
                f"{_label(owner)} is listed (close one of them to see the other).",
                "warning",
            )
            return False
        self._owner[sid] = host
        return True

    def _host_notice(self, host: str) -> NoticeListener:
        def tell(notice: Notice) -> None:
            if notice.key.startswith(_QUIET_NOTICES):
                return
            # A host's engine is not trusted with the screen: a notice of megabytes stays a toast.
            key, message = clip(notice.key, NOTICE_KEY_CHARS), clip(notice.message, NOTICE_CHARS)
            self.notices.emit(dataclasses.replace(notice, key=f"{key}@{host}", message=f"{host}: {message}"))

        return tell

    def _host_changed(self, host: str) -> None:
        self._stream.publish(HostChanged(host))

    # ---- reads ------------------------------------------------------------------------------------
    def ids(self) -> list[str]:
        return [view.id for view in self.views()]

    def views(self) -> tuple[SessionView, ...]:
        now = self.clock.now()
        found: list[SessionView] = []
        for name, engine in self._engines():
            offset = engine.clock.now() - now
            for view in engine.views():
                if self._owner.setdefault(view.id, name) == name:
                    found.append(_translated(view, offset))
        return tuple(found)

    def view(self, session_id: str) -> SessionView:
        engine = self.member(self.host_of(session_id))
        return _translated(engine.view(session_id), engine.clock.now() - self.clock.now())

    def history(self, session_id: str) -> Sequence[ChatItem]:
        return self.member(self.host_of(session_id)).history(session_id)

    def streaming_text(self, session_id: str) -> str:
        return self.member(self.host_of(session_id)).streaming_text(session_id)

    def subscribe(self, listener: Listener, *kinds: type[Record]) -> Unsubscribe:
        return self._stream.subscribe(listener, *kinds)

    def on_notice(self, listener: NoticeListener) -> Unsubscribe:
        return self.notices.listen(listener)

    def alerts_here(self) -> bool:
        return self.local.alerts_here()

    async def focus(self) -> None:
        await self.local.focus()
        for name, member in self._members.items():
            if member.health.view.live:
                task = asyncio.ensure_future(asyncio.wait_for(member.engine.focus(), PING_TIMEOUT))
                task.add_done_callback(functools.partial(_quiet, what=f"host {name}: focus"))

    # ---- life -------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Local's sessions are listed on return; the hosts attach in the background."""
        await self.local.start()
        if self._members:  # a killed dashboard's forwards' folders, found once (a few stats, off the loop)
            cleaning = asyncio.ensure_future(asyncio.to_thread(clean_stale_forwards))
            cleaning.add_done_callback(functools.partial(_quiet, what="cleaning stale forwards"))
        for sid in self.local.ids():
            self._owner.setdefault(sid, LOCAL)
        for name, member in self._members.items():
            changed = functools.partial(self._host_changed, name)
            self._tasks[name] = asyncio.create_task(member.run(changed), name=f"host {name}")

    async def detach(self, stop_engine: bool) -> None:
        for task in self._tasks.values():
            task.cancel()
        if self._tasks:  # bounded: a watch that would not end is left to the loop's end
            _done, pending = await asyncio.wait(self._tasks.values(), timeout=1.0)
            for task in pending:  # its member's close below ends it at its next step
                log.warning("host watch %s did not end on cancel", task.get_name())
        await asyncio.gather(*(m.close(False) for m in self._members.values()), return_exceptions=True)
        for stop in self._unsubscribe:
            stop()
        await self.local.detach(stop_engine)

    # ---- the verbs --------------------------------------------------------------------------------
    async def call(self, verb: Verb[Q, R], request: Q) -> R:
        """``verb`` asked of the host it concerns (docs/fleet.md); HostDown when that is not live."""
        if isinstance(request, Broadcast):
            return await self._broadcast(verb, request)  # type: ignore[return-value]
        sid = getattr(request, "session_id", None)
        group = getattr(request, "group", None)
        if isinstance(sid, str) and sid:
            return await self._live(self.host_of(sid)).call(verb, request)
        if isinstance(group, str) and group:
            return await self._group_call(group, verb, request)
        return await self.local.call(verb, request)

    def _live(self, host: str) -> Engine:
        if host == LOCAL:
            return self.local
        view = self._members[host].health.view
        if not view.live:
            why = f": {view.reason}" if view.reason else ""
            raise HostDown(f"{host} is {view.state.value}{why}; nothing was sent")
        return self._members[host].engine

    async def _group_call(self, group: str, verb: Verb[Q, R], request: Q) -> R:
        """Asked of the host known to hold ``group``, else of each live one in turn until one knows it."""
        known = self._groups.get(group)
        if known is not None:
            return await self._live(known).call(verb, request)
        order = [LOCAL, *(n for n, m in self._members.items() if m.health.view.live)]
        for host in order:
            try:
                reply = await self.member(host).call(verb, request)
            except UnknownGroup:
                continue
            self._groups[group] = host
            return reply
        raise UnknownGroup(f"no fan-out {group!r} on any live host")

    async def _broadcast(self, verb: Verb[Any, Any], request: Broadcast) -> tuple[BroadcastResult, ...]:
        """One broadcast per host of the sessions named, at once; the results in the order asked."""
        by_host: dict[str, list[str]] = {}
        for sid in request.session_ids:
            by_host.setdefault(self.host_of(sid), []).append(sid)

        async def one(host: str, sids: list[str]) -> tuple[BroadcastResult, ...]:
            # A host down or dropping mid-call refuses its own sessions only: the others' took it.
            try:
                engine = self._live(host)
            except HostDown as exc:
                return tuple(BroadcastResult(sid, "refused", str(exc)) for sid in sids)
            try:
                reply: tuple[BroadcastResult, ...] = await engine.call(verb, Broadcast(tuple(sids), request.prompt))
            except (EngineError, OSError, TimeoutError) as exc:
                why = f"{_label(host)} did not answer ({type(exc).__name__}: {exc}); it may not have been sent"
                return tuple(BroadcastResult(sid, "refused", why) for sid in sids)
            return reply

        answers = await asyncio.gather(*(one(h, s) for h, s in by_host.items()))
        merged = {r.session_id: r for answer in answers for r in answer}
        ordered = [merged.pop(sid) for sid in request.session_ids if sid in merged]
        return (*ordered, *merged.values())


def _label(host: str) -> str:
    return host or "Local"


def _translated(view: SessionView, offset: float) -> SessionView:
    """``view`` with its times on the fleet's clock (its engine's reads ``offset`` s ahead)."""
    if abs(offset) < CLOCK_SLACK:
        return view
    moved = {name: value - offset for name in _TIMES if (value := getattr(view, name)) is not None}
    return dataclasses.replace(view, **moved) if moved else view


def _quiet(task: asyncio.Future[Any], what: str) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.info("%s: %s", what, task.exception())


def ssh_members(entries: Sequence[HostEntry], clock: Clock, ssh_options: Sequence[str] = ()) -> list[Member]:
    """A member per host of the hosts file, in its order."""
    return [SshMember(entry, clock, ssh_options=ssh_options) for entry in entries]
