"""The ``polypilot`` command's entry point: no garbage collection while it starts.

Start-up makes hundreds of thousands of objects (the imports, Textual's CSS, the dashboard)
and almost none of them are garbage, yet Python's collector walks them every 700
allocations: ~10-20% of the dashboard's time to its first frame. Collections are off from
here; every command turns them back on as soon as it knows what it runs (cli.py), but three
that turn them on once started, each freezing what its start made (infra/collector.py): the
dashboard when its first frame is drawn (ui/app.py), the engine (``serve``) once it listens
(commands/engine.py), a headless run once its turn is under way (commands/run.py: its
imports, ~200 collections and 0.1-0.3 s of CPU, overlap its agent's boot) — or when one ends
before that. The price: the cycles start-up left as garbage are frozen too and kept for good
(~10,000 objects, ~1.2 MiB, in a dashboard measured; a collection before the freeze would pay
them back with a pause where the user starts typing, or the engine first answers).

A plain ``polypilot run`` starts its Copilot CLI here, before anything else is imported
(agents/head_start.py): the CLI boots while the settings, the engine and the SDK load, and the
run takes it only if it is exactly the one the validated settings ask for. A plain ``polypilot``
starts its engine here when none runs (service/spawn.py), for the state folder the raw settings
name: the dashboard takes it only for exactly the folder its validated settings name. Until the
dashboard handles them, SIGTERM and SIGHUP end the command through the ``finally`` that stops
an engine nobody claimed (they would end it past that, the engine left running).

A headless run that has finished, with no thread but its own left, ends without the
interpreter's teardown (:func:`leave_now`): unloading ~1,000 modules and their objects was
~15 ms of every run's end, for a process that has nothing more to do.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

QUITS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that would end the process where it stands, past the ``finally`` that stops an
early engine nobody claimed: until the dashboard handles them (ui/quit_signals.py), they end
it as SystemExit(128 + the signal), as the dashboard's quit does."""


def _quit(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold :data:`QUITS` and ctrl+c over the block (an early engine's spawn: one arriving
    between the spawn and its handing back would leave it running unowned), then raise the
    first that came; from then on, QUITS end the process by :func:`_quit`. A signal ignored
    (nohup, a background job) is left ignored."""
    held: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        held.append(signum)

    kept = {signo: signal.getsignal(signo) for signo in (*QUITS, signal.SIGINT)}
    mine = [signo for signo, handler in kept.items() if handler not in (signal.SIG_IGN, None)]
    for signo in mine:
        signal.signal(signo, hold)
    try:
        yield
    finally:
        for signo in mine:
            signal.signal(signo, _quit if signo in QUITS else kept[signo])
        if held and held[0] == signal.SIGINT:
            raise KeyboardInterrupt
        if held:
            raise SystemExit(128 + held[0])


def main() -> int:
    gc.disable()
    early = None
    engine = None
    try:
        if "run" in sys.argv[1:4]:  # `polypilot run`: its agent boots while the rest loads
            from polypilot_tui.agents.head_start import start_early

            early = start_early(sys.argv[1:])
        elif not sys.argv[1:]:  # a plain `polypilot`: its engine, when none runs, loads while the dashboard does
            from polypilot_tui.service.spawn import start_engine_early

            with _signals_held():
                engine = start_engine_early()
        from polypilot_tui.cli import main as run_command

        return run_command(early=early, engine=engine)
    finally:
        for started in (early, engine):
            if started is not None:
                started.discard()  # never left running unclaimed, however the command ended
        gc.enable()


def command() -> int:
    """The ``polypilot`` script (and ``python -m polypilot_tui``): :func:`main`, after which a
    finished headless run leaves at once (:func:`leave_now`). Tests that look at a run's
    process after it call :func:`main`."""
    code = main()
    if sys.argv[1:2] == ["run"]:  # the subcommand itself (options before it: the usual exit, 15 ms later)
        leave_now(code)
    return code


def leave_now(code: int) -> None:
    """End the process with ``code`` at once, skipping the interpreter's teardown, when only
    this thread is left (otherwise return: the usual exit waits for the others). What the
    teardown would still do is done first: logging's handlers and the standard streams are
    flushed (``logging.shutdown``, as its exit hook does). Everything else is closed by then
    (the run closes its engine: sessions, agents, the database)."""
    if threading.active_count() != 1:
        return
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # the reader left (the run says so in its code), or the stream was closed
    os._exit(code)
