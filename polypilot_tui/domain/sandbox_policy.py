"""The ``allow-in-sandbox`` permission policy: approve a tool only inside a sandboxed workspace.

A request is approved when the session runs sandboxed and everything the request names — its
paths, the words of its command that name a place, its working folder — lies inside the
session's workspace folder. Anything named outside, a URL, a kind of request that is not
about files or commands (MCP tools, memory, a fetch), a variable or a substitution that cannot
be placed, or a request that names nothing at all is asked as with ``ask``. Paths are
compared lexically (:func:`~polypilot_tui.domain.sandbox.within`): the sandbox itself, not this
policy, is what stops a write through a link.

Both backends' ``permission.requested`` data are read: Copilot's carries the CLI's request
(``permissionRequest``: shell, write, read, url, mcp…); an ACP agent's carries the tool call's
``kind``, ``locations`` and ``rawInput`` (its command and working folder).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.sandbox import Sandbox, normal, within

PLACED_KINDS = frozenset({"shell", "write", "read", "execute", "edit", "delete", "move", "search", "other"})
"""Kinds of request that can be placed by what they name (Copilot's, then ACP's tool kinds);
every other kind (url, fetch, mcp, custom-tool, memory, hook, think, switch_mode…) asks."""
DEVICES = frozenset({"/dev/null", "/dev/zero", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty"})
"""Paths a command may name without leaving its workspace (the sandbox's own /dev)."""
_SHELLS = frozenset({"sh", "bash", "zsh", "dash"})
_OPERATORS = frozenset({"|", "||", "&", "&&", ";", ";;", "(", ")", "!", "{", "}", "then", "do", "else", "if"})
"""Words after which a command's program comes (its own path is read, not written)."""
_PATH_KEYS = ("path", "filePath", "file_path", "abs_path", "notebook_path", "directories")
"""ACP ``rawInput`` keys that name a path (opencode, codex, claude)."""
ACP_INPUT_KEYS = (*_PATH_KEYS, "command", "cwd", "url")
"""What of an ACP tool call's ``rawInput`` its permission request carries (not a write's
whole content): what the policy places."""
_MOVES = frozenset({"cd", "pushd", "popd"})
"""Programs that change the shell's folder: the words after them are placed from there."""
_PREFIXES = frozenset({"builtin", "command", "eval", "exec", "time", "nohup", "nice"})
"""Words that run the word after them as the program."""
_FROM_DATA = frozenset({"xargs", "parallel"})
"""Programs that take their arguments from data (a file, stdin) the policy cannot read."""
_SEPARATORS = frozenset(";&|()\n")
_BRACES = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
"""A brace expansion (``{a,b}``, ``{1..3}``): what it makes cannot be placed by reading it."""
_GLOB = re.compile(r"[*?\[]")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_OPTION = re.compile(r"-{1,2}[A-Za-z][A-Za-z0-9-]*=?(.+)")
"""An option and its value in one word: ``-o/x``, ``--out=/x``."""
_PLAIN = re.compile(r"[^\s'\"`;|&<>(),=]+")
"""A word that can be a path as it is."""
_EMBEDDED = re.compile(r"(?<![\w.~-])(?:~[\w.-]*|\.\.)?/[^\s'\"`;|&<>(),=]*")
"""A path inside a longer word (a script's ``open('/etc/x')``), not the tail of ``src/main.py``."""


@dataclass(frozen=True, slots=True)
class Reach:
    """What one permission request names."""

    kind: str
    paths: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    cwd: str = ""
    """Where its command runs ("": the session's folder)."""
    concern: str = ""
    """Why it asks whatever it names (it asks to bypass the agent's own sandbox, a warning)."""


def reason_to_ask(data: Mapping[str, Any], workspace: str, sandbox: Sandbox) -> str:
    """Why the request in a ``permission.requested`` event's ``data`` must be asked of the user
    under ``allow-in-sandbox`` ("" when it may be approved)."""
    if not sandbox.on:
        return "the session does not run in a sandbox"
    if not workspace.startswith("/"):
        return "the session has no workspace folder"
    reach = reach_of(data)
    if reach.concern:
        return reach.concern
    if reach.kind not in PLACED_KINDS:
        return f"a {reach.kind or 'tool'} request is not about files in the workspace"
    if reach.urls:
        return f"it names {reach.urls[0]}"
    base = _placed(reach.cwd, workspace) if reach.cwd else workspace
    if not within(base, workspace):
        return f"it runs in {reach.cwd}, outside the workspace"
    for path in reach.paths:
        if why := _outside(path, base, workspace):
            return why
    for command in reach.commands:
        if why := _command_outside(command, base, workspace):
            return why
    if not reach.paths and not reach.commands:
        return "it names nothing the policy can place"
    return ""


def reach_of(data: Mapping[str, Any]) -> Reach:
    """What a ``permission.requested`` event's data names, for either backend."""
    request = next((data[k] for k in ("permissionRequest", "request") if isinstance(data.get(k), Mapping)), None)
    return _copilot_reach(request) if request is not None else _acp_reach(data)


def _copilot_reach(request: Mapping[str, Any]) -> Reach:
    kind = _str(request.get("kind"))
    kind = "shell" if kind == "commands" else kind
    concern = ""
    if request.get("requestSandboxBypass") is True or request.get("requestSandboxPermissive") is True:
        concern = "it asks to run outside the agent's own sandbox"
    elif _str(request.get("warning")):
        concern = f"the agent warns: {_str(request.get('warning'))[:200]}"
    paths = [_str(request.get(k)) for k in ("fileName", "path", "resolvedPath")]
    paths += _strs(request.get("possiblePaths"))
    resolved = request.get("resolvedPaths")
    if isinstance(resolved, Mapping):
        paths += [_str(v) for v in resolved.values()]
    edits = request.get("fileEdits")
    for edit in edits if isinstance(edits, list) else []:
        for side in ("before", "after"):
            part = edit.get(side) if isinstance(edit, Mapping) else None
            paths.append(_str(part.get("path")) if isinstance(part, Mapping) else "")
    urls = [_str(request.get("url"))]
    urls += [_str(u.get("url")) for u in request.get("possibleUrls") or [] if isinstance(u, Mapping)]
    command = _str(request.get("fullCommandText")) if kind == "shell" else ""
    return Reach(
        kind,
        tuple(p for p in paths if p),
        (command,) if command else (),
        tuple(u for u in urls if u),
        _str(request.get("resolvedWorkingDirectory")),
        concern,
    )


def _acp_reach(data: Mapping[str, Any]) -> Reach:
    raw = data.get("rawInput")
    raw = raw if isinstance(raw, Mapping) else {}
    paths = [_str(loc.get("path")) for loc in data.get("locations") or [] if isinstance(loc, Mapping)]
    for key in _PATH_KEYS:
        value = raw.get(key)
        paths += _strs(value) if isinstance(value, list) else [_str(value)]
    command = _command_text(raw.get("command"))
    url = _str(raw.get("url"))
    concern = "what it names is too long to place" if data.get("inputTooLong") is True else ""
    return Reach(
        _str(data.get("kind")),
        tuple(p for p in paths if p),
        (command,) if command else (),
        (url,) if url else (),
        _str(raw.get("cwd")),
        concern,
    )


def _command_text(command: Any) -> str:
    """A command as one shell text: a string as it is; an argv (codex's ``["/bin/bash", "-lc",
    "…"]``) as the script its shell runs, or the argv joined."""
    if isinstance(command, str):
        return command
    argv = _strs(command) if isinstance(command, list) else []
    if len(argv) >= 3 and posixpath.basename(argv[0]) in _SHELLS and argv[-2] in ("-c", "-lc"):
        return argv[-1]
    return shlex.join(argv)


def _placed(path: str, base: str) -> str:
    return normal(path if path.startswith("/") else posixpath.join(base, path))


def _outside(path: str, base: str, workspace: str) -> str:
    """Why ``path`` (relative to ``base``) is not placed inside ``workspace`` ("" when it is)."""
    if path.startswith("~") or "$" in path or "`" in path:
        return f"it names {path}, which cannot be placed"
    if _placed(path, base) in DEVICES:
        return ""
    if any(_may_match_parent(part) for part in path.split("/")):
        return f"it names {path}, whose pattern may match .."
    return "" if within(_placed(path, base), workspace) else f"it names {path}, outside the workspace"


def _command_outside(command: str, base: str, workspace: str, depth: int = 0) -> str:
    """Why a shell command names a place outside ``workspace`` ("" when every word naming a
    place is inside). Its program word is not checked (running /usr/bin/git writes nothing);
    a word that is itself a script (``bash -c "…"``) is read as one, twice deep at most. A
    ``cd`` that names no folder (home, the last one, the folder stack) is not placed."""
    try:
        words = _words(command)
    except ValueError:
        return "its command cannot be read"
    program = True
    moving = ""  # the cd, pushd or popd whose folder is still to come
    for word in words:
        if _is_operator(word):
            if moving:
                return f"its {moving} goes to a folder it does not name"
            program = True
            continue
        if moving and (word == "-" or not word.startswith("-")):
            if word == "-" or moving == "popd" or word.startswith("+"):
                return f"its {moving} {word} goes to a folder it does not name"
            moving = ""
        if program and word in _MOVES:
            moving = word
        if program and word in _FROM_DATA:
            return f"its {word} takes its arguments from data it does not name"
        if program and _ASSIGNMENT.match(word):  # FOO=bar before the program
            if why := _word_outside(word.split("=", 1)[1], base, workspace):
                return why
            continue
        if program and word in _PREFIXES:  # `builtin cd`: the program is the next word
            continue
        if program and _PLAIN.fullmatch(word):  # a name or a path, not `/etc/x,w` after a `(`
            program = False
            continue
        program = False
        if any(c.isspace() for c in word) and depth < 2:
            if why := _command_outside(word, base, workspace, depth + 1):
                return why
            continue
        if why := _word_outside(word, base, workspace):
            return why
    return f"its {moving} goes to a folder it does not name" if moving else ""


def _is_operator(word: str) -> bool:
    """A word after which a command's program comes: ``;``, ``&&``, a new line (``;\n`` is
    one word to the lexer)…"""
    return word in _OPERATORS or (word != "" and set(word) <= _SEPARATORS)


def _word_outside(word: str, base: str, workspace: str) -> str:
    """Why one word of a command names a place outside ``workspace``: as a whole (a path, an
    option's value ``--out=/x``, ``-o/x``), or a path inside it (``open('/etc/x')``)."""
    if "://" in word:
        return f"it names {word}"
    if "$" in word or "`" in word:
        return f"it uses {word}, which cannot be placed"
    if _BRACES.search(word):  # {.,.}./x is ../x to the shell
        return f"it uses {word}, whose braces cannot be placed"
    candidates = [word]
    if option := _OPTION.match(word):
        candidates.append(option.group(1))
    candidates += _EMBEDDED.findall(word)
    for candidate in candidates:
        placeable = _PLAIN.fullmatch(candidate) and (
            "/" in candidate or candidate.startswith("~") or candidate == ".." or _may_match_parent(candidate)
        )
        if placeable and (why := _outside(candidate, base, workspace)):
            return why
    return ""


def _may_match_parent(part: str) -> bool:
    """A glob that the shell may expand to ``..`` (``.?``, ``.*``, ``.[.]``): ``*`` and ``?``
    never match a leading dot, a bracket may."""
    return bool(_GLOB.search(part)) and part[0] not in "*?" and fnmatch.fnmatchcase("..", part)


def _words(command: str) -> Iterable[str]:
    """The words of a shell command, redirections and operators apart, a new line as one
    (ValueError when it cannot be split: an open quote)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    return list(lexer)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _strs(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
