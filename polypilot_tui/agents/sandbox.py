"""Agents in a sandbox: the one place that turns a session's sandbox into a bubblewrap argv.

:func:`rules_for` says what a session's agent may write (its folder or worktree, what git needs
in the repository for *that* worktree, the agent's own state folders, a private /tmp), what it
may not see (secrets folders, polypilot's own folders and its engine socket, the user's runtime
folder with its D-Bus and agent sockets) and what stays read-only inside a writable folder (git
hooks and config: a hook written by the agent would run outside the sandbox at the user's next
commit). :func:`sandboxed` wraps an argv in ``bwrap`` with those rules. docs/sandbox.md says why
each rule is there and what is left.

Order with the leash (agents/leash.py): the leash is outside, bwrap inside —
``leash -> bwrap -> bwrap's init (pid 1 of a new pid namespace) -> limiter -> agent``. The
leash's watcher sees every sandboxed process by its pid outside the namespace; ending bwrap's
init ends the whole namespace (the kernel kills every process of a pid namespace whose init
dies), and ``--die-with-parent`` ends the init when the outer bwrap is killed.

Nothing here runs without bwrap: a sandbox that cannot start is a :class:`BackendError` that
says why and how to fix it — never a silent start without the sandbox.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path

from polypilot_tui.agents.base import BackendError
from polypilot_tui.agents.locate import expand
from polypilot_tui.config import AgentConfig, Settings, config_dir
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.sandbox import Sandbox, SandboxRules, within
from polypilot_tui.workspace.git import config_output

BWRAP = "bwrap"
PROCESS_LIMIT = 4096
"""RLIMIT_NPROC inside the sandbox: tasks (threads count) of the sandbox's user. In the new user
namespace bwrap makes, a kernel of 5.14 or later counts it per namespace, so it limits this
sandbox alone; root is exempt from it (see docs/sandbox.md)."""

SECRETS = (
    "~/.ssh",
    "~/.aws",
    "~/.azure",
    "~/.config/gh",
    "~/.config/hub",
    "~/.config/gcloud",
    "~/.config/git/credentials",
    "~/.gnupg",
    "~/.docker",
    "~/.kube",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.terraform.d",
    "~/.netrc",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.pypirc",
    "~/.vault-token",
    "~/.s3cfg",
    "~/.config/rclone",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.config/containers/auth.json",
    "~/.Xauthority",
    "~/.ICEauthority",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.local/share/fish/fish_history",
    "~/.python_history",
    "~/.node_repl_history",
    "~/.psql_history",
    "~/.mysql_history",
    "~/.codex/auth.json",
    "~/.claude/.credentials.json",
    "~/.local/share/opencode/auth.json",
    "~/.gemini/oauth_creds.json",
    "~/.qwen/oauth_creds.json",
)
"""Hidden from every sandboxed agent: credentials that reach other machines (the X server's
cookie among them: with the network shared, its abstract socket is reachable, and a client
may type into the user's terminal), the histories that hold them typed on a command line, and
the other agents' sign-ins (an agent's own, in its state folder, stays: see
:func:`hidden_roots`)."""
NPM_CACHE = "/tmp/npm-cache"
"""npm's cache in the sandbox: in its private /tmp, gone with it. The user's ``~/.npm`` holds
``_npx/``, packages ``npx`` runs again without a check: one written by a sandboxed agent would
run outside the sandbox at the user's next ``npx``; so it stays read-only."""
SYSTEM_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock", "/run/podman", "/run/containerd")
"""Hidden too: a container daemon's socket is root on the machine."""

KEYCTL_SYSCALL = {"x86_64": 250, "aarch64": 219, "i686": 288, "armv7l": 311, "ppc64le": 355, "s390x": 280}
"""keyctl(2)'s number per machine (Python has no keyctl, and glibc no wrapper for it)."""
_LIMITER = (
    "import os,resource as r,sys;n=int(sys.argv[1]);h=r.getrlimit(r.RLIMIT_NPROC)[1];"
    "n=n if h==r.RLIM_INFINITY else min(n,h);r.setrlimit(r.RLIMIT_NPROC,(n,n));k=int(sys.argv[2])\n"
    "if k:import ctypes;ctypes.CDLL(None).syscall(k,1,None)\n"
    "os.execvp(sys.argv[3],sys.argv[3:])"
)
"""Run inside the sandbox (bwrap has no rlimit option): set the process limit (never above the
hard limit the user already has: raising it is refused), join a new, empty session keyring
(KEYCTL_JOIN_SESSION_KEYRING: the user's, inherited, may hold a Kerberos ticket or other
keys; without possessing it, a process of the user's may only see that it is there), exec
the agent."""
_JOINER = (
    "import os,sys;f=open(sys.argv[1],'w');f.write(str(os.getpid()));f.close();os.execvp(sys.argv[2],sys.argv[2:])"
)
"""Run before bwrap, outside the sandbox: join a cgroup (its ``cgroup.procs``), exec bwrap;
everything the sandbox starts is born in that cgroup."""
TMP_SIZE = 2 * 1024**3
"""Bytes the sandbox's private /tmp and /dev/shm may hold each (where bwrap can bound them:
``--size``, bubblewrap 0.8 or later): they live in memory, and one unbounded takes half of it."""
CGROUP_PREFIX = "polypilot-sandbox-"
CGROUP_SWEEP_AGE = 60.0
"""Seconds before an empty sandbox cgroup is removed: one made a moment ago (by another
engine, or a start still on its way) is empty until its sandbox joins it."""


class SandboxUnavailable(BackendError):
    """The sandbox cannot start here; the message says why and how to fix it."""


# ---------------------------------------------------------------------------- rules


def _real(path: str | Path) -> str:
    return os.path.realpath(os.path.expanduser(str(path)))


@dataclass(frozen=True, slots=True)
class GitNeeds:
    """What git needs to write for one folder's checkout, and what must stay read-only."""

    writable: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    """The repository's git folder, bound read-only first: a repository in /tmp would be
    hidden by the private /tmp otherwise, and git reads its other refs and packs."""
    made: tuple[str, ...] = ()
    """Folders to make before the start (a mount point must exist; a missing hooks folder would
    otherwise be the agent's to create)."""
    made_files: tuple[str, ...] = ()
    """Empty files to make before the start, for the same reasons (``config.worktree``)."""
    refused: str = ""
    """Why a sandbox does not start in this checkout ("" when it may): its ``.git`` is a link,
    or it points at a folder that is not this checkout's git folder (a repository that could
    name any folder of the user's there would get it made writable)."""


def _read_line(path: Path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.readline(4096).strip()
    except OSError:
        return ""


def _git_entry(folder: Path) -> Path | None:
    """The ``.git`` (folder or file) of the checkout holding ``folder``, or None."""
    for place in (folder, *folder.parents):
        entry = place / ".git"
        if entry.is_dir() or entry.is_file():
            return entry
    return None


def _hooks_path(folder: Path) -> str:
    """``core.hooksPath`` as git reads it in ``folder`` ("" when unset or git is missing)."""
    return config_output(str(folder), ["--get", "core.hooksPath"]).strip()


_NOT_THIS_CHECKOUT = (
    "a sandboxed session does not start in a checkout whose git folder is elsewhere through a "
    "link or a pointer that does not point back (a repository could name any folder of yours "
    "there and have it made writable); use a plain clone or `git worktree add`"
)


def _is_git_folder(path: Path) -> bool:
    """``path`` holds a repository (HEAD, objects, refs), not just any folder of the user's."""
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def _points_back(own: Path, common_dir: Path, entry: Path) -> bool:
    """A linked worktree's git folder is ``<common>/worktrees/<name>`` and its ``gitdir`` names
    the ``.git`` that points at it (as ``git worktree add`` makes them)."""
    return own.parent == common_dir / "worktrees" and _real(_read_line(own / "gitdir")) == _real(entry)


def _config_includes(folder: Path) -> list[str]:
    """The files git's config includes in ``folder`` (``include.path``, ``includeIf.*.path``,
    as git reads them: relative to the including file, ``~`` its home), real paths."""
    listing = config_output(str(folder), ["--show-origin", "--null", "--get-regexp", r"^include(if\..*)?\.path$"])
    items = listing.split("\0") if listing else []
    found = []
    for origin, entry in zip(items[0::2], items[1::2], strict=False):
        value = entry.partition("\n")[2]
        if not origin.startswith("file:") or not value:
            continue
        source = folder / origin.removeprefix("file:")
        found.append(_real(value if value.startswith("~") else source.parent / value))
    return found


def git_needs(folder: Path) -> GitNeeds:
    """What ``git add``, ``git commit`` and ``git status`` need to write for the checkout of
    ``folder`` (measured: docs/sandbox.md), and the files that must stay read-only.

    A linked worktree writes its own ``worktrees/<name>/`` folder (index, HEAD, logs), the
    common ``objects/``, and its branch's ref and reflog folders; the main checkout writes its
    ``.git`` folder. Read-only in any case: hooks and config (``core.hooksPath`` too when it is
    inside the folder, as husky's ``.husky``), the files that point git at its common folder
    (``.git`` of a worktree, ``commondir``, ``gitdir``), submodules' and other worktrees' folders.
    """
    entry = _git_entry(folder)
    if entry is None:
        return GitNeeds()
    if entry.is_symlink():
        return GitNeeds(refused=f"{entry} is a link to {_real(entry)}: {_NOT_THIS_CHECKOUT}")
    writable: list[str] = []
    protected: list[str] = []
    made: list[str] = []
    own = Path(_real(entry))
    if entry.is_file():  # "gitdir: <path>": a linked worktree, a submodule, a separate git dir
        line = _read_line(entry)
        if not line.startswith("gitdir:"):
            return GitNeeds()
        own = Path(_real(entry.parent / line.removeprefix("gitdir:").strip()))
        protected.append(str(entry))  # bound onto itself: it cannot be rewritten, renamed or removed
    pointer = _read_line(own / "commondir")  # only a linked worktree's git folder has one
    common_dir = Path(_real(own / pointer)) if pointer else own
    pointed = entry.is_file() or bool(pointer)  # a .git folder of its own is the checkout's, whatever it holds
    if pointed and (not _is_git_folder(common_dir) or (pointer and not _points_back(own, common_dir, entry))):
        return GitNeeds(refused=f"{entry} names {own}, which is not its git folder: {_NOT_THIS_CHECKOUT}")
    git_dir = own
    made_files = [str(own / "config.worktree")]  # an empty one: the agent cannot make one of its own
    if pointer:  # a linked worktree: its own folder, the objects, its branch's ref and reflog folders
        writable += [str(own), str(common_dir / "objects")]
        head = _read_line(own / "HEAD")
        ref_folder = os.path.dirname(head.removeprefix("ref: ").strip())
        if head.startswith("ref: refs/") and ".." not in ref_folder.split("/"):  # git's own refs only
            for base in (common_dir, common_dir / "logs"):
                place = base / ref_folder
                if not place.is_dir():
                    made.append(str(place))
                writable.append(str(place))
        protected += [str(own / name) for name in ("commondir", "gitdir")]
    else:  # a git folder of its own: all of it, bound onto itself (it cannot be replaced)
        writable.append(str(git_dir))
        for name in ("worktrees", "modules"):  # other checkouts' pointers, submodules' hooks
            if (git_dir / name).is_dir():
                protected.append(str(git_dir / name))
    hooks = common_dir / "hooks"
    if not hooks.is_dir():
        made.append(str(hooks))
    protected += [str(hooks), str(common_dir / "config"), str(git_dir / "config.worktree")]
    hooks_path = _hooks_path(folder)
    if hooks_path:
        top = entry.parent
        where = Path(_real(top / expand(hooks_path, os.environ)))
        if not where.exists() and within(str(where), _real(top)):  # outside, the agent cannot make it
            made.append(str(where))
        protected.append(str(where))
    for included in _config_includes(folder):  # a config of the repository's own, read by every git
        protected.append(included)
        if not os.path.lexists(included) and (within(included, str(entry.parent)) or within(included, str(own))):
            made_files.append(included)  # else the agent could make it
    return GitNeeds(
        tuple(dict.fromkeys(writable)),
        tuple(dict.fromkeys(protected)),
        (str(common_dir),),
        tuple(dict.fromkeys(made)),
        tuple(dict.fromkeys(made_files)),
    )


def agent_state_folders(agent: AgentConfig, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The agent's own state folders (``sandbox_writable``), expanded in its environment."""
    env = dict(os.environ if environ is None else environ) | agent.env
    return tuple(_real(expand(path, env)) for path in agent.sandbox_writable if path.strip())


def agent_read_only_folders(agent: AgentConfig, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The folders in the agent's state folders kept read-only (``sandbox_read_only``): the
    state folders are shared with its runs outside any sandbox, so code the agent loads from
    there (Copilot runs the newest CLI in its ``pkg`` folders) written in the sandbox would run
    outside it."""
    env = dict(os.environ if environ is None else environ) | agent.env
    return tuple(_real(expand(path, env)) for path in agent.sandbox_read_only if path.strip())


def polypilot_folders(settings: Settings, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """polypilot's own folders: the state folder (registry, history, the engine socket: an agent
    that reached the socket could answer its own permission prompts) and the config folder."""
    return (_real(settings.state_dir), _real(config_dir(environ)))


def runtime_folder(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The user's runtime folder: its D-Bus session bus starts programs outside any sandbox
    (``systemd-run --user``), and it holds the ssh and gpg agents' sockets."""
    found = environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    return (_real(found),) if os.path.isdir(found) else ()


def rules_for(
    sandbox: Sandbox,
    folder: Path | str,
    agent: AgentConfig,
    settings: Settings,
    environ: Mapping[str, str] | None = None,
) -> SandboxRules:
    """The rules of ``agent``'s sandbox in ``folder`` (its session's folder or worktree)."""
    return _rules(sandbox, folder, agent, settings, environ, git_needs(Path(_real(folder))))


def _rules(
    sandbox: Sandbox,
    folder: Path | str,
    agent: AgentConfig,
    settings: Settings,
    environ: Mapping[str, str] | None,
    git: GitNeeds,
) -> SandboxRules:
    env = dict(os.environ if environ is None else environ)
    writable = [_real(folder), *git.writable, *agent_state_folders(agent, env)]
    hidden = [path for root in hidden_roots(settings, env, agent) for path in hide_except(root, writable)]
    model: tuple[str, ...] = ()
    if sandbox.network is not None:  # imported only then: `polypilot run` starts its agent before the rest loads
        from polypilot_tui.agents.sandbox_net import model_endpoints

        model = model_endpoints(agent, env)
    return SandboxRules(
        writable=tuple(dict.fromkeys(writable)),
        protected=(*git.protected, *agent_read_only_folders(agent, env)),
        hidden=tuple(dict.fromkeys(hidden)),
        network=None if sandbox.network is None else tuple(dict.fromkeys((*sandbox.network, *model))),
        model_endpoints=model,
    )


def hidden_roots(settings: Settings, environ: Mapping[str, str], agent: AgentConfig | None = None) -> list[str]:
    """Every path hidden from a sandboxed agent, before the writable ones are taken out: but
    the secrets in ``agent``'s own state folders (its own sign-in)."""
    home = environ.get("HOME") or str(Path.home())
    own = agent_state_folders(agent, environ) if agent is not None else ()
    secrets = [_real(expand(path, {**environ, "HOME": home})) for path in SECRETS]
    secrets = [path for path in secrets if not any(within(path, folder) for folder in own)]
    return [*secrets, *polypilot_folders(settings, environ), *runtime_folder(environ), *SYSTEM_SOCKETS]


def hide_except(root: str, keep: Sequence[str]) -> list[str]:
    """The paths that hide ``root`` but the ``keep`` paths inside it (a session's worktree in the
    state folder, where polypilot makes worktrees), as the rules name them: ``root`` itself when
    it holds none of them, else each of its entries that is not on the way to one. The mounts
    hide such a folder whole and bind the kept paths back (:attr:`SandboxPlan.masked`), so an
    entry made there later is hidden too."""
    inside = [path for path in keep if within(path, root) and path != root]
    if not inside:
        return [root]
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    hidden: list[str] = []
    for name in names:
        entry = os.path.join(root, name)
        if any(path == entry for path in inside):
            continue
        if any(within(path, entry) for path in inside) and os.path.isdir(entry) and not os.path.islink(entry):
            hidden += hide_except(entry, inside)
        else:
            hidden.append(entry)
    return hidden


# ---------------------------------------------------------------------------- the argv


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def prepare(rules: SandboxRules, made: Sequence[str] = (), made_files: Sequence[str] = ()) -> None:
    """Make what must exist before the start: the agent's state folders (its home is read-only
    in the sandbox), a missing hooks folder, the read-only files' mount points (``made`` and
    ``made_files``; never the session's own folder: one that is gone stays gone). A hidden path
    that does not exist inside a writable folder would be the agent's to create: refused."""
    for path in rules.hidden:
        if not os.path.lexists(path) and any(within(path, w) for w in rules.writable):
            raise BackendError(
                f"the sandbox cannot hide {path}: it lies in a folder the agent may write "
                "(a sandboxed session cannot work in your home folder itself; pick a project folder)"
            )
    for path in made:
        if not os.path.isdir(path):
            os.makedirs(path, mode=0o700, exist_ok=True)
    for name in made_files:
        if not os.path.lexists(name):
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))


def _mounts(
    rules: SandboxRules, readable: Sequence[str] = (), masked: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """The bind and hide options, ancestors before what lies in them (a later mount covers an
    earlier one); then the remounts that make the hiding folders read-only (after the binds
    that may lie in them, as a worktree in the hidden state folder). A ``masked`` folder is
    hidden whole by an empty file system, what it holds of the rules bound back into it: the
    hidden entries the rules name in it need no mount of their own, and one made after the
    start (the session list, written a moment after a new session starts) is hidden too."""
    ops: list[tuple[int, int, list[str]]] = []
    remounts: list[str] = []
    for path in masked:
        ops.append((_depth(path), 0, ["--perms", "0755", "--tmpfs", path]))
        remounts += ["--remount-ro", path]
    for path in rules.hidden:
        if any(within(path, root) for root in masked):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            ops.append((_depth(path), 0, ["--perms", "0755", "--tmpfs", path]))
            remounts += ["--remount-ro", path]
        elif os.path.lexists(path):
            ops.append((_depth(path), 0, ["--ro-bind", "/dev/null", path]))
    for path in readable:
        if os.path.isdir(path):
            ops.append((_depth(path), 1, ["--ro-bind", path, path]))
    for path in rules.writable:
        if os.path.isdir(path):
            ops.append((_depth(path), 2, ["--bind", path, path]))
    for path in rules.protected:
        if os.path.exists(path):
            ops.append((_depth(path), 3, ["--ro-bind", path, path]))
    binds = [arg for _, _, args in sorted(ops, key=lambda op: (op[0], op[1])) for arg in args]
    return binds, remounts


def program_folders(command: Sequence[str]) -> list[str]:
    """The folders in /tmp that hold the programs and scripts ``command`` names, as written and
    where their links lead: the private /tmp would hide them, so they are shown read-only.
    A program needs more than its own file (a venv's packages, a Node package's tree), so the
    folder shown is the one right under /tmp that holds it (an agent unpacked in /tmp/agent;
    polypilot itself installed in a clean clone at /tmp/tmp.XXXX: its interpreter starts every
    sandbox, its forwarder script a network rule's). What the rules hide or make writable in
    it is mounted over it (deeper mounts come later)."""
    folders: list[str] = []
    for path in command:
        if not (os.path.isabs(path) and os.path.isfile(path)):
            continue
        for where in (os.path.abspath(path), _real(path)):
            if where.startswith("/tmp/"):
                folder = "/tmp/" + where.split("/")[2]
                if folder not in folders:
                    folders.append(folder)
    return folders


def sandboxed(
    argv: Sequence[str],
    rules: SandboxRules,
    cwd: Path | str,
    *,
    bwrap: str = BWRAP,
    process_limit: int = PROCESS_LIMIT,
    network_args: Sequence[str] = (),
    readable: Sequence[str] = (),
    masked: Sequence[str] = (),
    tmp_size: int | None = None,
) -> list[str]:
    """``argv`` run in bubblewrap with ``rules``: new namespaces (user, pid, ipc, uts, cgroup,
    and the network when the rules have a network rule: ``network_args`` then bring its
    gate in), all capabilities dropped, no new privileges (bwrap always sets
    PR_SET_NO_NEW_PRIVS: a setuid program cannot raise it), a new session (no TIOCSTI into
    the user's terminal), the rest of the file system read-only, a private /tmp, /proc and
    /dev of its own, and ``process_limit`` processes at most."""
    binds, remounts = _mounts(rules, (*readable, *program_folders([sys.executable, *argv])), masked)
    size = [] if tmp_size is None else ["--size", str(tmp_size)]
    return [
        bwrap,
        "--unshare-all",
        *(["--share-net"] if rules.network is None else []),
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        *size,
        "--tmpfs",
        "/dev/shm",
        "--proc",
        "/proc",
        *size,
        "--tmpfs",
        "/tmp",
        *binds,
        *remounts,
        *network_args,  # after /tmp and the binds into it: the gate's socket is put in /tmp
        "--setenv",
        "npm_config_cache",
        NPM_CACHE,
        "--chdir",
        _real(cwd),
        "--",
        sys.executable,
        "-I",
        "-S",
        "-c",
        _LIMITER,
        str(process_limit),
        str(KEYCTL_SYSCALL.get(os.uname().machine, 0)),
        *argv,
    ]


# ---------------------------------------------------------------------------- root's process limit


def pids_cgroup_base() -> Path | None:
    """Where this process may make a ``pids`` cgroup of its own: as root, in its own cgroup of
    the v1 ``pids`` hierarchy, or of the v2 one when ``pids`` is enabled for its children; None
    otherwise (a user's cgroup needs delegation, which is not asked for: RLIMIT_NPROC does it)."""
    if os.getuid() != 0:
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            base = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
            return base if os.access(base, os.W_OK) else None
    for line in lines:
        if line.startswith("0::"):
            base = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            enabled = read_sysctl(str(base / "cgroup.subtree_control")).split()
            return base if "pids" in enabled and os.access(base, os.W_OK) else None
    return None


def pids_cgroup(limit: int) -> str | None:
    """A new cgroup that allows ``limit`` processes, for one sandbox (its ``cgroup.procs``), or
    None where none can be made. The empty ones of sandboxes that ended are removed first (a
    cgroup with a process in it cannot be removed: the kernel refuses; one younger than
    :data:`CGROUP_SWEEP_AGE` is left, as it may not be joined yet)."""
    base = pids_cgroup_base()
    if base is None:
        return None
    for old in base.glob(f"{CGROUP_PREFIX}*"):
        try:
            if time.time() - old.stat().st_mtime > CGROUP_SWEEP_AGE:  # a young one may not be joined yet
                old.rmdir()
        except OSError:
            pass  # still in use, or gone already
    group = base / f"{CGROUP_PREFIX}{os.getpid()}-{os.urandom(4).hex()}"
    try:
        group.mkdir(mode=0o700)
        (group / "pids.max").write_text(str(limit), encoding="ascii")
    except OSError:
        try:
            group.rmdir()
        except OSError:
            pass
        return None
    return str(group / "cgroup.procs")


# ---------------------------------------------------------------------------- can it start


def read_sysctl(path: str) -> str:
    """A kernel setting from /proc/sys ("" when it is not there)."""
    try:
        with open(path, encoding="ascii") as file:
            return file.read().strip()
    except OSError:
        return ""


def userns_problem() -> str | None:
    """Why this kernel does not let a user make a user namespace (bwrap needs one), or None."""
    if read_sysctl("/proc/sys/user/max_user_namespaces") == "0":
        return (
            "user namespaces are off (user.max_user_namespaces is 0): "
            "turn them on with `sudo sysctl -w user.max_user_namespaces=15000`"
        )
    if read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return (
            "unprivileged user namespaces are off (kernel.unprivileged_userns_clone is 0): "
            "turn them on with `sudo sysctl -w kernel.unprivileged_userns_clone=1`"
        )
    if os.getuid() != 0 and read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return (
            "AppArmor keeps programs from making user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns is 1, as on Ubuntu 24.04): allow it with "
            "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or give bwrap an AppArmor "
            "profile that allows userns"
        )
    return None


@cache
def bounds_tmpfs(bwrap: str) -> bool:
    """This bwrap can bound a tmpfs's size (``--size``: bubblewrap 0.8 or later)."""
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in done.stdout


@cache
def _probe(bwrap: str) -> str:
    """What a trial sandbox said when it failed ("" when it ran): once per bwrap."""
    try:
        done = subprocess.run(
            [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--", "true"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return "" if done.returncode == 0 else (done.stderr.strip() or f"exit status {done.returncode}")


def find_bwrap(environ: Mapping[str, str] | None = None) -> str | None:
    """bwrap as found on the PATH of ``environ`` (the engine's), or None."""
    env = os.environ if environ is None else environ
    return shutil.which(BWRAP, path=env.get("PATH", os.defpath))


def sandbox_problem(sandbox: Sandbox, environ: Mapping[str, str] | None = None) -> str | None:
    """Why ``sandbox`` cannot start on this machine (and how to fix it), or None."""
    if sandbox.network is not None:  # the network rule (agents/sandbox_net.py) is kept by the sandbox
        if not sandbox.on:
            return "a network rule is kept by the sandbox: choose the workspace sandbox, or no network rule"
        from polypilot_tui.agents.sandbox_net import rule_problem

        if problem := rule_problem(sandbox.network):
            return problem
    if not sandbox.on:
        return None
    if sys.platform != "linux":
        return "sandboxed sessions run on Linux with bubblewrap; this machine is not Linux (see docs/sandbox.md)"
    found = find_bwrap(environ)
    if found is None:
        return "bubblewrap (bwrap) is not installed: install it with `sudo apt install bubblewrap` (Debian, Ubuntu)"
    problem = userns_problem()
    if problem is not None:
        return problem
    said = _probe(found)
    if said:
        return f"bubblewrap cannot make a sandbox here: {said}"
    return None


def require(sandbox: Sandbox, environ: Mapping[str, str] | None = None) -> str:
    """The bwrap to start ``sandbox`` with; :class:`SandboxUnavailable` when it cannot start."""
    problem = sandbox_problem(sandbox, environ)
    if problem is not None:
        raise SandboxUnavailable(f"the session is sandboxed and its sandbox cannot start: {problem}")
    found = find_bwrap(environ)
    assert found is not None
    return found


# ---------------------------------------------------------------------------- a launch


@dataclass(frozen=True, slots=True)
class SandboxPlan:
    """A session's sandbox as its backend gets it: the choice and its rules."""

    sandbox: Sandbox
    rules: SandboxRules
    made: tuple[str, ...] = ()
    """Folders :func:`prepare` makes before the start: the agent's state folders, GitNeeds.made."""
    made_files: tuple[str, ...] = ()
    """Empty files :func:`prepare` makes before the start (GitNeeds.made_files)."""
    readable: tuple[str, ...] = ()
    """Bound read-only before the rules' binds: the repository's git folder (GitNeeds.readable)
    and the home folder, which the private /tmp would hide where they lie in /tmp."""
    masked: tuple[str, ...] = ()
    """Hidden folders that hold a writable one (the state folder and a worktree in it): hidden
    whole by the mounts, the writable one bound back (the rules name their other entries, as
    the policy reads them)."""
    gates: str = ""
    """Where a network rule's gate makes its socket (in polypilot's state folder; the
    sandbox sees only its own, bound in)."""
    refused: str = ""
    """Why this sandbox does not start ("" when it may): GitNeeds.refused."""


def plan_for(
    sandbox: Sandbox,
    folder: Path | str,
    agent: AgentConfig,
    settings: Settings,
    environ: Mapping[str, str] | None = None,
) -> SandboxPlan | None:
    """The plan of a session's sandbox (None when it is off)."""
    if not sandbox.on:
        return None
    git = git_needs(Path(_real(folder)))
    env = os.environ if environ is None else environ
    home = _real(env.get("HOME") or Path.home())  # shown as it is (read-only) even in /tmp
    rules = _rules(sandbox, folder, agent, settings, environ, git)
    split = [root for root in hidden_roots(settings, env, agent) if root not in rules.hidden and os.path.isdir(root)]
    made = (*agent_state_folders(agent, env), *agent_read_only_folders(agent, env), *git.made)
    gates = str(Path(_real(settings.state_dir)) / "net")
    return SandboxPlan(
        sandbox, rules, made, git.made_files, (*git.readable, home), tuple(split), gates=gates, refused=git.refused
    )


def launch_argv(
    plan: SandboxPlan | None,
    argv: Sequence[str],
    cwd: Path | str,
    environ: Mapping[str, str],
    *,
    process_limit: int = PROCESS_LIMIT,
) -> list[str]:
    """``argv`` as the backend starts it: in its sandbox when there is one, else as it is.
    BackendError (never a start without the sandbox) when the sandbox cannot start."""
    if plan is None:
        return list(argv)
    if plan.refused:
        raise SandboxUnavailable(f"the session is sandboxed and its sandbox cannot start: {plan.refused}")
    bwrap = require(plan.sandbox, environ)
    prepare(plan.rules, plan.made, plan.made_files)
    rules, network_args = plan.rules, []
    if rules.network is not None:
        # The network rule (agents/sandbox_net.py): a gate in the engine's loop, which closes
        # itself when the sandbox ends; its forwarder starts the agent inside and sets the
        # agent's proxy variables. Its folder is hidden like the rest of polypilot's: the
        # sandbox sees only its own socket, bound in.
        from polypilot_tui.agents.sandbox_net import open_gate

        try:
            gate = open_gate(rules.network, Path(plan.gates))
        except (OSError, ValueError, RuntimeError) as exc:
            raise SandboxUnavailable(f"the session's network rule cannot be kept: {exc}") from None
        argv, network_args = gate.wrap(list(argv)), gate.bwrap_args()
        rules = replace(rules, hidden=(*rules.hidden, plan.gates))
    command = sandboxed(
        argv,
        rules,
        cwd,
        bwrap=bwrap,
        readable=plan.readable,
        masked=plan.masked,
        process_limit=process_limit,
        network_args=network_args,
        tmp_size=TMP_SIZE if bounds_tmpfs(bwrap) else None,
    )
    # RLIMIT_NPROC does nothing for root: a pids cgroup does, where root may make one.
    procs = pids_cgroup(process_limit)
    return command if procs is None else [sys.executable, "-I", "-S", "-c", _JOINER, procs, *command]
