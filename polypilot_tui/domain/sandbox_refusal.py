"""Whether a tool's failure is the sandbox refusing a write (or hiding a secret).

In a sandboxed session the rest of the file system is read-only and the secrets folders are
hidden, so a refused write reads, depending on the program, as "Read-only file system"
(EROFS, bash, coreutils, git, Python, Node), as "Permission denied" (EACCES: a file the
sandbox's user does not own, outside the folders it may write) or as "No such file or
directory" (ENOENT: inside a hidden folder); a path kept read-only inside its folder (git's
hooks and config, a worktree's ``.git``: each a mount point) cannot be removed or renamed,
"Device or resource busy" (EBUSY). The texts are the real programs' own, collected
inside ``bwrap --ro-bind / / …`` (tests/unit/test_sandbox_refusal.py).
"""

from __future__ import annotations

import posixpath
import re

from polypilot_tui.domain.sandbox import SandboxRules, normal, within

REFUSED = "refused"
"""The tool row status of a tool the sandbox refused (its words: domain/chat.py)."""

_READ_ONLY = re.compile(r"read-only file system|\bEROFS\b|\[Errno 30\]", re.IGNORECASE)
_DENIED = re.compile(r"permission denied|\bEACCES\b|\[Errno 13\]|operation not permitted|\bEPERM\b", re.IGNORECASE)
_BUSY = re.compile(r"device or resource busy|resource busy or locked|\bEBUSY\b|\[Errno 16\]", re.IGNORECASE)
_MISSING = re.compile(r"no such file or directory|\bENOENT\b|\[Errno 2\]", re.IGNORECASE)
_QUOTED = re.compile(r"""'([^'\n]+)'|‘([^’\n]+)’|"([^"\n]+)"|`([^`'\n]+)'""")
_BARE = re.compile(r"(?<![\w.~/-])(/[^\s:'\"‘’`,;)]*|[\w.-]+(?:/[\w.-]+)+)")
_SCAN_CHARS = 64_000
"""A refusal is said near the end of what a tool printed: only its last characters are read."""


def refused_by_sandbox(text: str, rules: SandboxRules, cwd: str) -> bool:
    """``text`` (a failed tool's output, of a sandboxed session whose folder is ``cwd``) says
    the sandbox refused it: a read-only file system; a permission denied, or a busy mount
    point, on a path the sandbox does not let it write; a missing file inside a hidden folder."""
    for line in text[-_SCAN_CHARS:].splitlines():
        if _READ_ONLY.search(line):
            return True
        denied = bool(_DENIED.search(line) or _BUSY.search(line))
        missing = bool(_MISSING.search(line))
        if not denied and not missing:
            continue
        for path in _paths(line, cwd):
            if denied and not rules.may_write(path):
                return True
            if missing and any(within(path, h) for h in rules.hidden):
                return True
    return False


def _paths(line: str, cwd: str) -> list[str]:
    """The paths a line of an error names, made absolute against ``cwd``."""
    found = ["".join(groups) for groups in _QUOTED.findall(line)]
    found += _BARE.findall(line)
    return [normal(p if p.startswith("/") else posixpath.join(cwd or "/", p)) for p in found if "/" in p or cwd]
