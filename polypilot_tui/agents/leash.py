"""Agent processes die with the app: a tiny launcher between the app and every agent.

The app starts ``python -I -S leash.py <app pid> -- <agent argv…>`` instead of the agent:

1. ``setsid()``: the agent and everything it starts (tool shells, helper binaries) form
   their own process group, so they can be signalled as one, and a ctrl+c on the app's
   terminal reaches the app (which stops its agents properly), not the agents directly;
2. a *watcher* is started in that group (forked twice, so it is no process of the agent's
   tree, and run with no environment). It holds none of the agent's pipes and sleeps
   until the app or the agent ends (a pidfd where Linux has them, else a 0.1 s poll).
   When the app ends, however it ends (SIGKILL included), the watcher sends SIGTERM to the
   group and SIGKILL :data:`TERM_GRACE` seconds later; when the agent ends, it kills what
   the agent left behind. The watcher ignores SIGTERM, SIGINT and SIGHUP;
3. the launcher execs the agent: same pid, so the SDK's process handle is the agent's own.

Why not ``PR_SET_PDEATHSIG``: it fires when the parent *thread* ends, and an SDK may start
its agent from a worker thread that ends long before the app; it would also reach only
the agent, not its children. A pidfd watches the app *process*, and the group holds them all.

This file runs as a script with only the standard library (``-S``: no site, fast start);
the app side is :func:`leashed`.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

TERM_GRACE = 0.5
"""Seconds between SIGTERM and SIGKILL once the app is gone: agents may save their state."""
POLL = 0.1
LEASH_FILE = os.path.abspath(__file__)


def leashed(argv: list[str]) -> list[str]:
    """The argv that starts ``argv`` on a leash held by this process."""
    return [sys.executable, "-I", "-S", LEASH_FILE, str(os.getpid()), "--", *argv]


def _pidfd(pid: int) -> int | None:
    # Only Linux has pidfds (the platform check also tells mypy so on every OS); an old
    # kernel, or a Python built without the syscall, leaves the watcher polling.
    if sys.platform != "linux":
        return None
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_either(app_pid: int, agent_pid: int) -> str:
    """Block until the app or the agent ends; returns which ("app" or "agent")."""
    app_fd, agent_fd = _pidfd(app_pid), _pidfd(agent_pid)
    if app_fd is not None and agent_fd is not None:
        poller = select.poll()
        poller.register(app_fd, select.POLLIN)
        poller.register(agent_fd, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if app_fd in ready:
                return "app"
            if agent_fd in ready:
                return "agent"
    while True:  # no pidfds (old kernel, another OS): poll
        if not _alive(app_pid):
            return "app"
        if not _alive(agent_pid):
            return "agent"
        time.sleep(POLL)


def watch(app_pid: int, agent_pid: int) -> None:
    """The watcher: in the agent's group, no pipes, no environment; ends the group with the app."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    if _wait_either(app_pid, agent_pid) == "app":
        os.killpg(0, signal.SIGTERM)
        deadline = time.monotonic() + TERM_GRACE
        while time.monotonic() < deadline and _alive(agent_pid):
            time.sleep(0.02)
    os.killpg(0, signal.SIGKILL)  # the group, this watcher included


def _start_watcher(app_pid: int, agent_pid: int) -> None:
    """Fork twice, so the watcher is nobody's child (not a process of the agent's tree) but
    stays in the agent's group; it runs as its own small program with an empty environment
    and /dev/null for stdio (it must hold none of the agent's pipes)."""
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return
    try:
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.execve(sys.executable, [sys.executable, "-I", "-S", LEASH_FILE, "--watch", str(app_pid),
                                       str(agent_pid)], {})
    finally:
        os._exit(0)


def main(args: list[str]) -> int:
    if len(args) == 3 and args[0] == "--watch":
        watch(int(args[1]), int(args[2]))
        return 0
    if len(args) < 3 or args[1] != "--":
        sys.stderr.write("usage: leash.py APP_PID -- COMMAND [ARG...]\n")
        return 2
    app_pid, argv = int(args[0]), args[2:]
    os.setsid()
    if not _alive(app_pid):
        return 1
    _start_watcher(app_pid, os.getpid())
    # Python ignores SIGPIPE and SIGXFSZ for itself; the agent and its tools must not inherit that.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[0]}: {exc.strerror or exc}\n")
        return 127
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
