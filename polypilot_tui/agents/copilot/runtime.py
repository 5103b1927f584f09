"""Process-level helpers of the Copilot backend: hooks into the SDK client, the CLI process.

Kept apart from :mod:`polypilot_tui.agents.copilot.connection` so the connection reads as a
sequence of steps and these small, testable pieces can be checked without a CLI. The CLI's
environment and provider are cli_spec.py's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from polypilot_tui.agents.copilot.sdk_errors import SHAPE_ERRORS, sdk_failures
from polypilot_tui.domain import eventlog
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.events import EventType
from polypilot_tui.infra.process_tree import descendants

log = logging.getLogger(__name__)


def session_home(env: Mapping[str, str]) -> Path:
    """``COPILOT_HOME`` the CLI will use (its default is ``~/.copilot``)."""
    home = env.get("COPILOT_HOME")
    return Path(home) if home else Path.home() / ".copilot"


_PARSE_ERRORS: tuple[type[Exception], ...] = (*SHAPE_ERRORS, OverflowError)
"""What the SDK's event parser raises on an odd event (OverflowError: its date parser on a
year past 9999)."""

SDK_OWN_EVENTS = frozenset(
    {
        "external_tool.requested",
        "external_tool.completed",
        "permission.requested",
        "mcp.oauth_required",
        "command.execute",
        "elicitation.requested",
        "capabilities.changed",
        "session.canvas.opened",
        "session.canvas.closed",
    }
)
"""Session events the SDK's session acts on itself (``CopilotSession._handle_broadcast_event``:
it runs a tool, answers a prompt, keeps a capability): they go through its parser and
dispatch. Every other event reaches us as the CLI sent it (a test holds this list to the
pinned SDK's)."""


def install_hooks(
    client: Any,
    loop: asyncio.AbstractEventLoop,
    *,
    on_raw_event: Callable[[str, dict[str, Any]], None],
    on_closed: Callable[[], None],
) -> None:
    """Wrap the SDK's JSON-RPC notification handler and close hook (private API, guarded).

    - An event the SDK does not act on (all but :data:`SDK_OWN_EVENTS`) is handed to
      ``on_raw_event`` as the CLI sent it, without the SDK's parse: that parse, and our
      ``to_dict`` of what it built, cost ~250 µs an event (its generated classes, its date
      parser) where the raw form (events.py, the form of the CLI's own log) costs ~2 µs, and
      streaming sessions send hundreds a second. Both paths run on the loop, in order.
    - Some CLI events fail the SDK's generated parser (e.g. ``tool.execution_complete`` of
      a tool re-run after resume): the SDK then drops them with a traceback. The wrapper
      delivers those from the raw dict instead, so no completion is ever lost.
    - ``on_close`` fires on the reader thread when the CLI's stdout closes; we hop onto the
      loop before reporting.
    """
    rpc = getattr(client, "_client", None)
    if rpc is None:
        log.debug("copilot: SDK internals changed; no parse-failure or close hooks")
        return
    original = getattr(rpc, "notification_handler", None)
    if callable(original):

        def notification(method: str, params: dict[str, Any]) -> None:
            event = params.get("event") if method == "session.event" and isinstance(params, dict) else None
            # Any type but one of SDK_OWN_EVENTS' strings (a list or an object too: not hashable,
            # so not looked up) is ours raw, as the SDK's parser would have failed on it.
            if isinstance(event, dict) and not (type(kind := event.get("type")) is str and kind in SDK_OWN_EVENTS):
                on_raw_event(str(params.get("sessionId") or ""), event)
                return
            try:
                original(method, params)
            except _PARSE_ERRORS:  # its parser failed: the SDK would only log it and drop the event
                if not isinstance(event, dict):
                    log.debug("copilot: notification %s failed", method, exc_info=True)
                    return
                log.info("copilot: SDK could not parse a %s event; using the raw form", event.get("type"))
                on_raw_event(str(params.get("sessionId") or ""), event)

        rpc.set_notification_handler(notification)
    previous_close = getattr(rpc, "on_close", None)

    def closed() -> None:
        try:
            if callable(previous_close):
                previous_close()
        finally:
            if not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(on_closed)
                except RuntimeError:
                    pass

    rpc.on_close = closed


def watch_process(
    proc: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop, on_exit: Callable[[int | None], None]
) -> None:
    """A daemon thread waits for ``proc`` to exit and reports its code on ``loop``.

    A thread, not the loop's default executor: the SDK writes JSON-RPC through that
    executor, and a few long waits there would starve it.
    """

    def wait() -> None:
        try:
            code: int | None = proc.wait()
        except OSError:
            code = None
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(on_exit, code)
            except RuntimeError:  # the loop closed meanwhile
                pass

    threading.Thread(target=wait, name=f"copilot-watch-{proc.pid}", daemon=True).start()


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``proc`` and its descendants (a running tool must not outlive a Kill)."""
    if proc.poll() is not None:
        return
    for pid in [*descendants(proc.pid), proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:  # the leash made the CLI the leader of a group that holds every process it started
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def open_tool_ids(entries: Sequence[Mapping[str, Any]]) -> set[str]:
    """Tool calls started and not completed in an events.jsonl tail."""
    started: set[str] = set()
    for entry in entries:
        data = entry.get("data")
        call_id = data.get("toolCallId") if isinstance(data, Mapping) else None
        if not isinstance(call_id, str):
            continue
        if entry.get("type") == EventType.TOOL_START:
            started.add(call_id)
        elif entry.get("type") == EventType.TOOL_COMPLETE:
            started.discard(call_id)
    return started


@dataclass(frozen=True)
class ResumeHints:
    """What a resumed session's log tail and the CLI say about the turn it was in."""

    interrupted_tool: bool
    still_processing: bool
    lost_turn: bool


def resume_hints(
    entries: Sequence[dict[str, Any]], age: float | None, pending_tool_ids: set[str], processing: bool | None
) -> ResumeHints:
    """Combine the log tail (read before resuming) with the resumed CLI's own view.

    A tool waiting on a permission that is still pending is not interrupted: answering it
    runs the tool. The log alone cannot tell a turn the CLI carried on (pending permission,
    ``processing`` True) from one it dropped (killed mid-tool, ``processing`` False), so
    the CLI's answer decides when it gave one.
    """
    interrupted = eventlog.has_interrupted_tool(entries) and not open_tool_ids(entries) <= pending_tool_ids
    return ResumeHints(
        interrupted_tool=interrupted,
        still_processing=eventlog.is_still_processing(entries, age) and processing is not False,
        lost_turn=eventlog.lost_turn(entries) and not processing,
    )


async def is_processing(session: Any, timeout: float = 30.0) -> bool | None:
    """The CLI's view of whether ``session`` is mid-turn; None when it cannot say."""
    try:
        result = await asyncio.wait_for(session.rpc.metadata.is_processing(), timeout)
    except sdk_failures() as exc:  # a hint only
        log.debug("copilot: is_processing failed: %r", exc)
        return None
    value = getattr(result, "processing", None)
    return value if isinstance(value, bool) else None
