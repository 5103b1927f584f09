"""Agent processes die with the app: a tiny launcher between the app and every agent.

The app starts the agent through :func:`leashed`'s launcher, a ``/bin/sh`` script, with
``start_new_session=True``:

1. the agent gets a session (and process group) of its own, so a ctrl+c on the
   app's terminal reaches the app (which stops its agents properly), not the agents directly;
2. a *watcher* is started in that session (forked twice, so it is no process of the agent's
   tree, and run with no environment), in a process group of its own: the app stops an agent
   by killing its group, and that must not end the watcher before it has ended the tools that
   left the group (it did once). It holds none of the agent's pipes and waits until the
   app or the agent ends (a pidfd where Linux has them, else a 0.1 s poll), looking at what
   the agent started every :data:`SCAN` seconds meanwhile. When the app ends, however it ends
   (SIGKILL included), the watcher sends SIGTERM to every process of the agent's and SIGKILL
   :data:`TERM_GRACE` seconds later; when the agent ends, it kills at once what the agent left
   behind. The watcher ignores SIGTERM, SIGINT and SIGHUP;
3. the launcher execs the agent: same pid, so the SDK's process handle is the agent's own.

Why a shell: the launcher is on the path of every agent's start, and a Python launcher cost
~30 ms there (the interpreter, this file compiled, its imports). The shell reads what it needs
from /proc and forks the watcher through ``python -I -S -c`` with a few lines and no imports
(:data:`START_WATCHER`), which returns once the watcher is in a group of its own; then it
execs the agent, ~20 ms after the spawn (~30 ms before). The watcher itself, this file, starts
beside the booting agent. Starting later loses nothing: the watcher is forked inside the
agent's session, and a session lives as long as one member does (the shell, then the
watcher), so neither its id nor the agent's pid can be handed to another process meanwhile,
and the last pid handed out is read before the agent execs. Where the launcher cannot tell it
leads its own session (no ``/proc``: macOS; a caller that did not ask for a new session), it
execs this file as the launcher instead, which does each step itself (the watcher started the
same way).

What "every process of the agent's" means: a process group or session is not enough, because
tools leave them — Node starts a ``detached`` child with ``setsid()``, and the Copilot CLI runs
its shell tools that way, so a ``sleep 20`` outlived a SIGKILLed CLI by its own group. The
watcher therefore follows the *tree*: it remembers each process it has seen as (pid, start
time) and takes in every new process whose parent it knows, or that is in a session one of
its processes is in (a session lives as long as one member does, so its id is not reused
meanwhile; the agent's own session is held by the watcher itself). A reused pid has another
start time and is never signalled: each kill goes through a pidfd opened *before* the start
time is checked again, so the check and the kill are about the same process.

It stays cheap for hours: it looks only at pids the kernel handed out since its last look
(the last pid is in ``/proc/loadavg``), and at the few processes it knows — not at every
process of the machine (about 9 µs each) every quarter second. Its one blind spot is a
deliberate daemon: a process that leaves the agent's session *and* whose parent ends within
one :data:`SCAN` (``setsid cmd &`` from a shell that exits at once) has no parent or session
the watcher knows by the time it looks. Closing that gap would take a cgroup per agent
(``cgroup.kill``, exact but needing a delegated cgroup, which containers and most sessions
do not give) or making the agent a child subreaper (``PR_SET_CHILD_SUBREAPER``: orphans then
stay the agent's, but it never reaps children it does not know of, so they pile up as
zombies, and a tool's ``getppid() == 1`` check for "my parent died" stops working).

Why not ``PR_SET_PDEATHSIG``: it fires when the parent *thread* ends, and an SDK may start
its agent from a worker thread that ends long before the app; it would also reach only
the agent, not its children. A pidfd watches the app *process*.

This file runs as a script with only the standard library (``-S``: no site, fast start);
the app side is :func:`leashed`.
"""

from __future__ import annotations

import itertools
import os
import select
import signal
import sys
import time

TERM_GRACE = 0.5
"""Seconds between SIGTERM and SIGKILL once the app is gone: agents may save their state."""
POLL = 0.1
SCAN = 0.25
"""Seconds between two looks at what the agent started (a tool that leaves its session is
found within this long, and ended with the agent however it regrouped)."""
KILL_ROUNDS = 20
"""Looks for processes still to kill at the end (a tool may fork while it is being killed)."""
UNSEEN_LOOKS = 8
"""Looks again at a pid handed out but not yet in /proc: a fork takes the pid (and /proc/loadavg
names it) a moment before the process shows in /proc, and a look in that moment would skip
the process for good."""
LEASH_FILE = os.path.abspath(__file__)


LAUNCHER = """\
app=$1 py=$2 leash=$3 start=$4; shift 4
sid= last=-
{ read -r _ _ _ _ _ sid _ </proc/$$/stat; read -r _ _ _ _ last </proc/loadavg; } 2>/dev/null
[ "$sid" = "$$" ] || exec "$py" -I -S "$leash" "$app" -- "$@"
kill -0 "$app" 2>/dev/null || exit 1
"$py" -I -S -c "$start" "$leash" "$app" "$$" "$last" </dev/null >/dev/null || {
    echo "polypilot-leash: the watcher could not start ($py); not starting $1" >&2
    exit 126
}
exec "$@"
"""
"""The shell launcher: ``sh -c LAUNCHER NAME APP_PID PYTHON LEASH_FILE START_WATCHER
AGENT_ARGV…``. When it leads a session of its own (its session id in /proc is its pid) it runs
:data:`START_WATCHER`, then execs the agent; otherwise it execs this file as the launcher.
``last`` is the last pid handed out (``/proc/loadavg``'s last field); the agent's pid is the
shell's (``$$``). A watcher that cannot start fails the launch: no agent runs unwatched."""

START_WATCHER = """\
import os, sys
child = os.fork()
if child:
    try:
        os.setpgid(child, child)
    except OSError:
        pass  # it did so itself and exec'd already
    os._exit(0)
try:
    os.setpgid(0, 0)
except OSError:
    pass
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
os.execve(sys.executable, [sys.executable, "-I", "-S", sys.argv[1], "--watch", *sys.argv[2:]], {})
"""
"""Run by the shell launcher (``python -I -S -c``, ~10 ms: no script to compile, nothing to
import): forks the watcher, which is in a process group of its own before this returns (both
sides of the fork set it), so a group kill of the agent, which the shell execs next, never
reaches it; the watcher then runs this file with no environment and /dev/null for stdio."""


def leashed(argv: list[str]) -> list[str]:
    """The argv that starts ``argv`` on a leash held by this process. Start it with
    ``start_new_session=True``: without, it still works, through the slower Python launcher."""
    return [
        "/bin/sh",
        "-c",
        LAUNCHER,
        "polypilot-leash",
        str(os.getpid()),
        sys.executable,
        LEASH_FILE,
        START_WATCHER,
        *argv,
    ]


def pidfd(pid: int) -> int | None:
    """A pidfd of ``pid``, or None where there is none (the caller then polls)."""
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


class Proc:
    """What /proc says of a live process (a zombie has ended: it is not one). A plain class:
    ``typing`` (NamedTuple) would add 10 ms and 1 MB to every agent start."""

    __slots__ = ("ppid", "sid", "start")

    def __init__(self, ppid: int, sid: int, start: int) -> None:
        self.ppid = ppid
        self.sid = sid
        self.start = start
        """Start time in clock ticks after boot: with the pid, it names one process for good."""


def read_proc(pid: int) -> Proc | None:
    """What /proc says of ``pid`` (parent, session, start time), or None once it has ended."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            raw = file.read()
        fields = raw[raw.rindex(b")") + 2 :].split()  # the name may hold spaces and parentheses
        if fields[0] == b"Z":
            return None
        return Proc(int(fields[1]), int(fields[3]), int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None


def _leads_its_process(pid: int) -> bool:
    """``pid`` is a process, not another thread of one (/proc answers for thread ids too)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as file:
            for line in file:
                if line.startswith(b"Tgid:"):
                    return int(line.split()[1]) == pid
    except (OSError, ValueError, IndexError):
        pass
    return False


def _last_pid() -> int | None:
    """The pid the kernel handed out last (in this pid namespace)."""
    try:
        with open("/proc/loadavg", "rb") as file:
            return int(file.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def _pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max", "rb") as file:
            return int(file.read())
    except (OSError, ValueError):
        return 4_194_304  # the largest pid_max Linux allows


def _all_pids() -> list[int]:
    try:
        return sorted(int(name) for name in os.listdir("/proc") if name.isdigit())
    except OSError:
        return []


class Tree:
    """The agent's processes as far as the watcher has seen them: pid -> what it was."""

    def __init__(self, agent_pid: int, since: int | None) -> None:
        self.known: dict[int, Proc] = {}
        agent = read_proc(agent_pid)
        if agent is not None:
            self.known[agent_pid] = agent
        self.session = os.getsid(0)
        """The agent's session: the watcher is in it, so its id cannot go to anyone else."""
        self._me = os.getpid()
        self._last = since
        self._pid_max = _pid_max()
        self._unseen: dict[int, int] = {}
        """Pids handed out that /proc did not show yet -> looks left (see UNSEEN_LOOKS)."""

    def refresh(self) -> None:
        """Forget the processes that ended; take in those born since the last look that are ours."""
        live = {
            pid: proc
            for pid, proc in self.known.items()
            if (now := read_proc(pid)) is not None and now.start == proc.start
        }
        last = _last_pid()
        if last is None or self._last is None:  # no last pid to go by: look at every process
            born: list[int] | range | itertools.chain[int] = _all_pids()
        elif last >= self._last:
            born = range(self._last + 1, last + 1)
        else:  # the pids wrapped around
            born = itertools.chain(range(self._last + 1, self._pid_max), range(1, last + 1))
        self._last = last
        unseen, self._unseen = self._unseen, {}
        # In the order they were handed out: a parent before its children.
        for pid in itertools.chain(sorted(unseen), born):
            if pid in live or pid == self._me:
                continue
            proc = read_proc(pid)
            if proc is None:  # ended already, or its fork is not done yet: look again
                looks = unseen.get(pid, UNSEEN_LOOKS) - 1
                if looks > 0:
                    self._unseen[pid] = looks
            elif self._ours(proc, live) and _leads_its_process(pid):
                live[pid] = proc
        self.known = live

    def _ours(self, proc: Proc, live: dict[int, Proc]) -> bool:
        parent = live.get(proc.ppid)
        return (
            (parent is not None and parent.start <= proc.start)
            or proc.sid == self.session
            or any(known.sid == proc.sid for known in live.values())
        )

    def everything(self) -> dict[int, Proc]:
        """Every process of the agent's now: the tree, and every process of a session it is in."""
        self.refresh()
        sessions = {self.session} | {proc.sid for proc in self.known.values()}
        for pid in _all_pids():
            if (
                pid not in self.known
                and pid != self._me
                and (proc := read_proc(pid)) is not None
                and proc.sid in sessions
            ):
                self.known[pid] = proc
        return dict(self.known)


def signal_if_same(pid: int, proc: Proc, signum: int) -> None:
    """Signal ``pid`` if it is still the process that was seen (never one that reused its pid)."""
    fd = pidfd(pid)
    try:
        now = read_proc(pid)
        if now is None or now.start != proc.start:
            return
        if fd is not None:
            signal.pidfd_send_signal(fd, signum)
        else:  # no pidfds: a pid reused between the look and the kill is not ruled out
            os.kill(pid, signum)
    except OSError:
        pass  # it ended meanwhile
    finally:
        if fd is not None:
            os.close(fd)


def _wait_either(app_pid: int, agent_pid: int, tree: Tree) -> str:
    """Block until the app or the agent ends, following the agent's tree meanwhile; returns
    which ended ("app" or "agent")."""
    app_fd, agent_fd = pidfd(app_pid), pidfd(agent_pid)
    if app_fd is not None and agent_fd is not None:
        poller = select.poll()
        poller.register(app_fd, select.POLLIN)
        poller.register(agent_fd, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll(int(SCAN * 1000))}
            if app_fd in ready:
                return "app"
            if agent_fd in ready:
                return "agent"
            tree.refresh()
    looked = time.monotonic()
    while True:  # no pidfds (old kernel): poll
        if not _alive(app_pid):
            return "app"
        if not _alive(agent_pid):
            return "agent"
        if time.monotonic() - looked >= SCAN:
            tree.refresh()
            looked = time.monotonic()
        time.sleep(POLL)


def watch(app_pid: int, agent_pid: int, since: int | None = None) -> None:
    """The watcher: in the agent's session, no pipes, no environment; ends the agent's
    processes with the app, and what the agent leaves behind when it ends."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    tree = Tree(agent_pid, since)
    if _wait_either(app_pid, agent_pid, tree) == "app":
        for pid, proc in tree.everything().items():
            signal_if_same(pid, proc, signal.SIGTERM)
        deadline = time.monotonic() + TERM_GRACE
        while time.monotonic() < deadline and _alive(agent_pid):
            time.sleep(0.02)
    for _ in range(KILL_ROUNDS):
        left = tree.everything()
        if not left:
            break
        for pid, proc in left.items():
            signal_if_same(pid, proc, signal.SIGKILL)
        time.sleep(0.01)
    # What is left of the agent's group (a fork loop can outrun the rounds) goes at once. Safe:
    # the watcher, out of that group, still holds the session of that id, so no stranger can
    # have been given it as a group.
    try:
        os.killpg(agent_pid, signal.SIGKILL)
    except OSError:
        pass  # the group is empty


def _start_watcher(app_pid: int, agent_pid: int, since: int | None) -> bool:
    """Start the watcher as the shell launcher does (:data:`START_WATCHER`, waited for: the
    watcher has its own group when it returns); whether it started."""
    last = "-" if since is None else str(since)
    argv = [sys.executable, "-I", "-S", "-c", START_WATCHER, LEASH_FILE, str(app_pid), str(agent_pid), last]
    null = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1)]
    try:
        child = os.posix_spawn(sys.executable, argv, os.environ, file_actions=null)
    except OSError:
        return False
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0


def main(args: list[str]) -> int:
    if len(args) == 4 and args[0] == "--watch":
        watch(int(args[1]), int(args[2]), None if args[3] == "-" else int(args[3]))
        return 0
    if len(args) < 3 or args[1] != "--":
        sys.stderr.write("usage: leash.py APP_PID -- COMMAND [ARG...]\n")
        return 2
    app_pid, argv = int(args[0]), args[2:]
    if os.getsid(0) != os.getpid():  # the shell launcher's fallback may lead its session already
        os.setsid()
    if not _alive(app_pid):
        return 1
    # Taken before anything of the agent's can start: the watcher looks at every pid after it.
    if not _start_watcher(app_pid, os.getpid(), _last_pid()):
        sys.stderr.write(f"the watcher could not start ({sys.executable}); not starting {argv[0]}\n")
        return 126
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
