"""Running the git CLI: the one place that builds every git command the app runs.

Calls are bounded in time and output, never prompt (no terminal, no credential question,
no editor, no pager) and fail in words. What a repository can make git run is decided here.

**Two kinds of call.** The app's own calls (the default): change counts, diffs, folder
checks, drafting a message, and making, listing, pruning and removing worktrees. The user
did not ask to run git, so no program a repository names runs — a repository is content
(cloned, unpacked, or written to by an agent), not code we run. Calls the user asked for by
name (``user_asked=True``: Finish's commit, merge and push) run as ``git commit`` typed in
that worktree would, hooks included: they are the repository's rules for exactly these
commands (a pre-commit formatter, a secret-scanning pre-push, git-lfs's pre-push that uploads
the files a push refers to); skipping them silently would commit and push what the user's
own checks refuse. A hook a hostile repository planted runs at the user's next ``git commit``
there just the same: the button adds no exposure the repository did not already have.

**The inherited environment** is dropped (``GIT_DIR``, ``GIT_INDEX_FILE``,
``GIT_EXTERNAL_DIFF``, ``GIT_CONFIG_PARAMETERS``/``GIT_CONFIG_COUNT``, ``GIT_EXEC_PATH``…
would point git elsewhere or inject config) except the user's identity, their choice of
config file and their ssh command (:data:`KEPT_ENVIRONMENT`). The system and global config
files (``/etc/gitconfig``, ``~/.gitconfig``) are the user's and the admin's: trusted. The
repository's own (``.git/config``, ``config.worktree`` and what they include) is not.

**Every key of ``git help config`` that names a program**, and what the app's calls do:

- ``core.fsmonitor`` (a hook program, or git's daemon): ``false``.
- ``core.hooksPath`` and ``$GIT_DIR/hooks``: ``core.hooksPath=/dev/null``, so no hook runs
  (``post-checkout`` on ``worktree add``, ``reference-transaction`` on every branch made or
  deleted, ``post-index-change``, ``pre-auto-gc``).
- ``filter.<x>.clean`` / ``smudge`` / ``process`` / ``required``: a driver the repository's
  config defines or redefines is blanked (set back to the user's own value if they have
  one); the user's own drivers (git-lfs in ``~/.gitconfig``) run, or new worktrees of an
  LFS repository would hold pointer files. Read with ``git config --show-scope`` per call,
  unless the repository's own config files, read as git reads them, plainly cannot define
  a filter (none of the words "filter", "include", "lfs" in them: no process for a diff to
  wait for).
- ``diff.external``, ``diff.<x>.command``: ``--no-ext-diff`` on every ``diff`` (also a
  user-level difftastic prints nothing we can read); ``GIT_EXTERNAL_DIFF`` is dropped.
- ``diff.<x>.textconv``: ``--no-textconv`` on every ``diff``.
- ``core.pager``, ``pager.<cmd>``: ``--no-pager`` and ``GIT_PAGER=cat``.
- ``core.editor``, ``sequence.editor``: ``GIT_EDITOR=true``, ``GIT_SEQUENCE_EDITOR=true``.
- ``core.sshCommand``, ``ssh.variant``, ``core.gitProxy``, ``core.askPass``,
  ``credential.helper``, ``credential.<url>.helper``, ``remote.<x>.uploadpack`` /
  ``receivepack`` / ``vcs`` / ``proxy``, ``url.<x>.insteadOf``, ``core.alternateRefsCommand``:
  only a transport runs them, and the app's calls never reach one: ``protocol.allow=never``
  (a partial clone's lazy fetch fails in words instead of running them).
- **What the user's own git-lfs reads from the repository**: its config (programs:
  ``lfs.extension.<x>.clean`` / ``smudge``, ``lfs.customtransfer.<x>.path``) and its
  ``.lfsconfig``, which is content: the server to download from (``lfs.url``), whose answer
  picks the transfer program. So the app's calls never download: git-lfs's smudge is
  skipped (``GIT_LFS_SKIP_SMUDGE``), and a new worktree's LFS files are filled from the
  objects stored here (:func:`fill_lfs_files`; what is missing stays a pointer file). The
  ``lfs`` driver is blanked for a repository whose config names a program of its own
  (looked up with the filters), and ``core.askPass`` is blank (nothing prompts, nothing asks
  ``git credential``).
- ``gpg.program``, ``gpg.<format>.program``, ``gpg.ssh.defaultKeyCommand``: the app makes
  no commit; ``log.showSignature=false`` so no listing verifies one.
- ``merge.<x>.driver``: only a merge runs it, and only the user merges.
- ``submodule.recurse``: ``false``; ``status`` and ``diff`` get ``--ignore-submodules=dirty``
  (git would otherwise run ``git status`` inside each submodule, under its own config).
- ``alias.*``: never; the app runs git's own commands, which no alias can replace.
- ``difftool.*``, ``mergetool.*``, ``guitool.*``, ``browser.*``, ``web.browser``, ``man.*``,
  ``sendemail.*``, ``gitcvs.*``, ``instaweb.*``: belong to commands the app never runs.
- ``uploadpack.packObjectsHook``, ``receive.*``, ``trace2.*``, ``init.templateDir``: the
  serving side, or read by git only from the system and global files (the user's).

The user's calls keep all of this as git would have it, except: the environment is
dropped as above, nothing prompts (ssh in ``BatchMode`` unless the user set their own
``GIT_SSH_COMMAND``), and ``ext::`` remotes (a command as transport) never run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Sequence

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.exit_status import exit_text

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 60.0
REAP_SECONDS = 1.0
"""Seconds a git cancelled (and killed) is waited for to end, at most."""
MAX_OUTPUT = 64 * 1024 * 1024
"""A diff larger than this is cut (the view says so) rather than held whole in memory."""

KEPT_ENVIRONMENT = frozenset(
    {
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_SSH_COMMAND",
        "GIT_SSH",
    }
)
"""The only inherited ``GIT_*`` variables: who commits, which config files, which ssh."""

TRUSTED_SCOPES = frozenset({"system", "global"})
"""Config files of the user and the admin; ``local``, ``worktree`` (and ``command``) are not."""

_APP_CONFIG = (
    ("core.askPass", ""),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
    ("log.showSignature", "false"),
)
_EVERY_CALL_CONFIG = (
    ("color.ui", "false"),
    ("core.quotePath", "false"),
    ("protocol.ext.allow", "never"),
)
_SUBCOMMAND_OPTIONS = {
    # Our parser reads a/ and b/ prefixes and whole-repository paths, whatever diff.noprefix,
    # diff.mnemonicPrefix or diff.relative say.
    "diff": (
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        "--no-relative",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        "--ignore-submodules=dirty",
    ),
    "status": ("--ignore-submodules=dirty",),
}
_FILTER_KEYS = ("clean", "smudge", "process", "required")
_LOOKED_UP = r"^filter\.|lfs\."
"""The keys looked up for :func:`untrusted_settings` (git-lfs finds its programs' keys
anywhere in a key's name: ``remote.lfs.customtransfer.x.path`` defines one)."""
_LFS_PROGRAM = re.compile(r"lfs\.(?:extension|customtransfer)\.|standalonetransferagent\Z", re.IGNORECASE)
_NO_CONTENT = frozenset({"rev-parse", "symbolic-ref", "check-ref-format", "merge-base", "rev-list", "config"})
"""Commands that read refs and objects only: no file goes through a filter, no lookup needed."""
_NO_CONTENT_CALLS = frozenset({("ls-files", "--others", "--exclude-standard", "-z")})
"""Exact calls that read directories and ``.gitignore`` files but no file's content, so no
filter runs (other ``ls-files`` forms may: ``--modified`` compares contents, through ``clean``)."""


class WorkspaceError(Exception):
    """Something about a folder, a repository or a git call that the user must be told."""


class GitMissing(WorkspaceError):
    """The git command is not installed."""


@dataclass(frozen=True, slots=True)
class GitResult:
    """What one git call printed, and how it ended."""

    code: int
    out: bytes
    err: str
    truncated: bool = False

    @property
    def text(self) -> str:
        """Standard output as text (invalid UTF-8 replaced, never dropped)."""
        return self.out.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        return self.code == 0


def git_binary() -> str:
    """The git executable, or :class:`GitMissing`."""
    found = shutil.which("git")
    if found is None:
        raise GitMissing("git is not installed: worktrees, change counts and diffs need the git command")
    return found


def git_environment(config: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """The environment of every git (and ``gh``) the app runs: ``config`` as command-line
    settings (``GIT_CONFIG_KEY_n``: a name holding ``=`` or spaces needs no quoting)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_") or key in KEPT_ENVIRONMENT}
    env.update(
        GIT_TERMINAL_PROMPT="0",  # a push that needs a password fails instead of hanging
        GIT_PAGER="cat",
        GIT_EDITOR="true",  # a merge never opens an editor for its message
        GIT_SEQUENCE_EDITOR="true",
        LC_ALL="C",  # messages we match on (conflicts) are not translated
        GIT_OPTIONAL_LOCKS="0",  # status and diff never fight the agent for the index lock
    )
    # ssh ignores GIT_TERMINAL_PROMPT and would ask on /dev/tty, over the dashboard.
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for n, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
    return env


def git_arguments(args: Sequence[str]) -> list[str]:
    """The command line for ``git args``: no pager, and the options every ``diff`` and
    ``status`` needs (no external diff, no textconv, nothing run inside submodules)."""
    head = [git_binary(), "--no-pager"]
    if not args:
        return head
    return [*head, args[0], *_SUBCOMMAND_OPTIONS.get(args[0], ()), *args[1:]]


def untrusted_settings(listing: str) -> list[tuple[str, str]]:
    """Settings that undo what the repository's own config sets for a program to run from
    the app's calls (``listing`` is ``git config --null --show-scope --get-regexp`` output of
    :data:`_LOOKED_UP` keys):

    - **filters**: each key an untrusted scope sets goes back to the value the user's own
      config gives it, or blank (no filter, not required). A ``process`` the user does not set
      cannot be taken back (set at all, even blank, git stops using clean and smudge), so
      that driver is blanked whole.
    - **what the user's git-lfs would run**: it reads the repository's config too. An
      extension, a custom transfer or a standalone transfer agent there: the ``lfs`` driver
      is blanked whole for the call (the file against its pointer, not the repository's
      program), and no new worktree's files are filled from the store (:func:`fill_lfs_files`).
    """
    entries = []
    fields = listing.split("\0")
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):
        key, _, value = entry.partition("\n")
        entries.append((scope in TRUSTED_SCOPES, key, value))
    trusted = {key: value for mine, key, value in entries if mine}
    untrusted: dict[str, set[str]] = {}
    for mine, key, _ in entries:
        name, _, item = key.removeprefix("filter.").rpartition(".")
        if not mine and key.startswith("filter.") and name and item in _FILTER_KEYS:
            untrusted.setdefault(name, set()).add(item)
    undone: dict[str, str] = {}
    for name, items in sorted(untrusted.items()):
        if "process" in items and f"filter.{name}.process" not in trusted:
            undone.update((f"filter.{name}.{item}", "") for item in _FILTER_KEYS)
        else:
            undone.update((key, trusted.get(key, "")) for key in (f"filter.{name}.{item}" for item in sorted(items)))
    if any(not mine and _LFS_PROGRAM.search(key) for mine, key, _ in entries):
        undone.update((f"filter.lfs.{item}", "") for item in _FILTER_KEYS)
    return list(undone.items())


@dataclass(frozen=True, slots=True)
class AppConfig:
    """The settings the app's own calls in one folder run with (looked up once, reusable for
    a burst of calls there, such as one diff per new file)."""

    config: tuple[tuple[str, str], ...]


async def app_config(cwd: str, args: Sequence[str] = ()) -> AppConfig:
    """What the app's own call ``git args`` in ``cwd`` runs with: nothing a repository names.
    Without ``args``: settings good for any command there."""
    config = (*_EVERY_CALL_CONFIG, *_APP_CONFIG)
    if args and (args[0] in _NO_CONTENT or tuple(args) in _NO_CONTENT_CALLS):
        return AppConfig(config)
    if _plain_repository_config(cwd):
        return AppConfig(config)  # what the lookup below would find, without a process to wait for
    listed = await _run(
        git_arguments(["config", "--null", "--show-scope", "--get-regexp", _LOOKED_UP]),
        cwd,
        git_environment(),
        None,
        DEFAULT_TIMEOUT,
    )
    # 1: no such key. Anything else: the command itself fails on the same config.
    return AppConfig(config + tuple(untrusted_settings(listed.text)) if listed.ok else config)


async def git(
    args: Sequence[str],
    cwd: str,
    *,
    check: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    stdin: bytes | None = None,
    user_asked: bool = False,
    settings: AppConfig | None = None,
) -> GitResult:
    """Run ``git args`` in ``cwd``; with ``check``, a non-zero exit raises :class:`WorkspaceError`
    naming the command and git's own message.

    ``user_asked``: the user asked for this git operation by name (commit, merge, push), so
    the repository's hooks and configured programs run as git would run them for the user;
    otherwise none does (see the module's docstring), with ``settings`` when given (from
    :func:`app_config` for the same folder), else looked up now.
    """
    config = _EVERY_CALL_CONFIG if user_asked else (settings or await app_config(cwd, args)).config
    env = git_environment(config)
    if not user_asked:
        env["GIT_LFS_SKIP_SMUDGE"] = "1"  # no download from where the repository says (its .lfsconfig)
    result = await _run(git_arguments(args), cwd, env, stdin, timeout)
    if check and not result.ok:
        raise WorkspaceError(f"git {' '.join(args[:2])} failed in {cwd}: {describe(result)}")
    return result


_PLAIN_CONFIG_BYTES = 1024 * 1024
_LOOKUP_WORDS = (b"filter", b"include", b"lfs")
_HEAD = re.compile(rb"ref: refs/[^\0\n]*\n?|[0-9a-f]{40}(?:[0-9a-f]{24})?\n?")


def _plain_repository_config(cwd: str) -> bool:
    """Whether the repository's own config files, read here as git reads them in ``cwd``,
    set none of the keys :func:`untrusted_settings` undoes, nor include a file that could:
    none of them holds the words of :data:`_LOOKUP_WORDS`, in any case (a section's name is
    plain ASCII: ``[filter "x"]``, ``[Filter.x]``, ``[includeIf …]`` all spell them). Then
    the lookup process would find nothing to undo. Only for the top of a working tree (its
    ``.git`` there), with no link anywhere on the way to those files; False whenever unsure:
    another layout, a link, a file that is not a plain one or is too big."""
    try:
        git_dir, common = _git_dirs(os.path.realpath(cwd))
        texts = [_small_file(os.path.join(common, "config"))]
        worktree_config = os.path.join(git_dir, "config.worktree")
        if os.path.lexists(worktree_config):
            texts.append(_small_file(worktree_config))
    except (OSError, ValueError):
        return False
    return not any(word in text.lower() for text in texts for word in _LOOKUP_WORDS)


def _git_dirs(top: str) -> tuple[str, str]:
    """(the git dir, the common dir) git uses in ``top`` (a real path) when its ``.git`` is
    there (a folder, or a file naming one); ValueError where git could look further up, die,
    or read other files than we would. A link is refused on the whole way: one into
    ``/proc/self`` or ``/dev/fd`` names another file to git, in its own process, than to us."""
    dot = os.path.join(top, ".git")
    kind = os.lstat(dot).st_mode
    if stat.S_ISDIR(kind):
        git_dir = dot
    elif stat.S_ISREG(kind):
        git_dir = _unlinked(_named_path(top, _small_file(dot), b"gitdir: "))
    else:
        raise ValueError(dot)
    named = os.path.join(git_dir, "commondir")
    common = _unlinked(_named_path(git_dir, _small_file(named))) if os.path.lexists(named) else git_dir
    # A folder git does not take for a repository (git's is_git_directory) sends it further up.
    if not _HEAD.fullmatch(_small_file(os.path.join(git_dir, "HEAD"))):
        raise ValueError(git_dir)
    for name in ("objects", "refs"):
        path = os.path.join(common, name)
        if not (stat.S_ISDIR(os.lstat(path).st_mode) and os.access(path, os.X_OK)):
            raise ValueError(path)
    return git_dir, common


def _named_path(base: str, text: bytes, prefix: bytes = b"") -> str:
    """The path a ``.git`` file or a ``commondir`` file names, as git reads it: its line
    endings dropped, relative to ``base`` unless absolute."""
    if not text.startswith(prefix):
        raise ValueError(base)
    named = text[len(prefix) :].rstrip(b"\r\n")
    if not named or b"\n" in named or b"\0" in named:
        raise ValueError(base)
    return os.path.join(base, os.fsdecode(named))


def _unlinked(path: str) -> str:
    """``path`` (absolute) made plain, when no part of it is a link (``a/link/..`` included,
    which the kernel reads from the link's target); else ValueError."""
    plain = os.path.normpath(path)
    if os.path.realpath(path) != plain:
        raise ValueError(path)
    return plain


def _small_file(path: str) -> bytes:
    """A plain file's bytes, never through a link; ValueError for anything else (a FIFO is
    never waited on) or a file too big to be a plain config."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_size > _PLAIN_CONFIG_BYTES:
            raise ValueError(path)
        data = os.read(fd, _PLAIN_CONFIG_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _PLAIN_CONFIG_BYTES:
        raise ValueError(path)
    return data


async def fill_lfs_files(folder: str) -> None:
    """Fill a new worktree's LFS files from the objects its repository stores, as the user's
    git-lfs would have on checkout but never downloading (the app's calls skip its smudge:
    see the module's docstring); a missing object stays a pointer file. Only where the
    user's own config runs git-lfs as the ``lfs`` filter, and the repository's names no lfs
    program (the driver is blanked then), in a worktree whose top ``.gitattributes`` sends
    files to it. Nothing is raised: the files stay pointer files and the log says why."""
    lfs = shutil.which("git-lfs")
    if lfs is None or not _uses_lfs(folder):
        return  # git-lfs would mark the repository's config as its own even so
    settings = await app_config(folder)
    listed = await git(
        ["config", "--get-regexp", r"^filter\.lfs\.(process|smudge)$"], folder, check=False, settings=settings
    )
    driver = dict(line.partition(" ")[::2] for line in listed.text.splitlines())  # the last of each key wins, as in git
    if not any("git-lfs" in command for command in driver.values()):
        return
    filled = await _run([lfs, "checkout"], folder, git_environment(settings.config), None, DEFAULT_TIMEOUT)
    if not filled.ok:
        log.warning("LFS files of %s left as pointers: git-lfs checkout: %s", folder, describe(filled))


def _uses_lfs(folder: str) -> bool:
    """Whether ``folder``'s own ``.gitattributes`` sends files to the ``lfs`` filter."""
    try:
        return b"filter=lfs" in _small_file(os.path.join(folder, ".gitattributes"))
    except (OSError, ValueError):
        return False


def config_output(folder: str, args: Sequence[str], timeout: float = 10.0) -> str:
    """What ``git config args`` prints in ``folder``, run at once and blocking (the sandbox's
    launcher reads hooks and includes as it plans a start): "" when git is missing, fails, or
    finds nothing. Nothing the repository names runs (a config read runs no program)."""
    try:
        done = subprocess.run(
            git_arguments(["config", *args]),
            cwd=folder,
            env=git_environment(),  # the repository's own values are what is read: none of the app's
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            start_new_session=True,
        )
    except (OSError, subprocess.TimeoutExpired, GitMissing):
        return ""
    return done.stdout if done.returncode == 0 else ""


async def _run(command: list[str], cwd: str, env: dict[str, str], stdin: bytes | None, timeout: float) -> GitResult:
    what = " ".join(["git", *command[2:3]]) if command[1:2] == ["--no-pager"] else os.path.basename(command[0])
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # no controlling terminal: nothing can prompt over the dashboard
        )
    except FileNotFoundError:
        raise WorkspaceError(f"the folder {cwd} does not exist") from None
    except NotADirectoryError:
        raise WorkspaceError(f"{cwd} is not a folder") from None
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise WorkspaceError(f"{what} did not finish within {timeout:.0f} s in {cwd}") from None
    except asyncio.CancelledError:
        if proc.returncode is None:
            proc.kill()
        # Reaped in the loop, not left to its end (infra/event_loop.py); bounded, as a hook of a
        # git the user asked for may hold its pipes open after git is killed.
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), REAP_SECONDS)
        except TimeoutError:
            pass
        raise
    truncated = len(out) > MAX_OUTPUT
    return GitResult(proc.returncode or 0, out[:MAX_OUTPUT], err.decode("utf-8", "replace"), truncated)


def describe(result: GitResult) -> str:
    """git's message, in a line or a few (its stderr, else its stdout)."""
    text = (result.err.strip() or result.text.strip() or exit_text(result.code)).splitlines()
    lines = [line.removeprefix("fatal: ").removeprefix("error: ").strip() for line in text if line.strip()]
    return "; ".join(lines[:4])
