"""The hosts of a fleet, kept in the config folder (``hosts.json``, 0600 in a 0700 folder).

Only names, targets, the remote command and extra ssh options are kept: keys, passwords and
host keys stay the user's ssh's (~/.ssh, the agent). Every entry is checked when read and
when added (domain/hosts.py); a file that does not read is an error naming it, never ignored.
"""

from __future__ import annotations

import os
from pathlib import Path

from polypilot_tui.config import config_dir
from polypilot_tui.domain.hosts import MAX_HOSTS, HostEntry, HostError, entries_from_json
from polypilot_tui.domain.safe_json import ParseError, dump_json, load_json
from polypilot_tui.infra.private import atomic_write, check_private_dir, private_dir, read_private

HOSTS_FILE = "hosts.json"
MAX_BYTES = 256 * 1024


class HostsFileError(Exception):
    """The hosts file cannot be read or written: the message names it and says why."""


def hosts_path(folder: Path | None = None) -> Path:
    """Where the hosts are kept: ``hosts.json`` in the config folder (or ``folder``)."""
    return (folder if folder is not None else config_dir()) / HOSTS_FILE


def read_hosts(path: Path) -> list[HostEntry]:
    """The hosts in ``path`` in their order ([] when there is no file)."""
    if not os.path.lexists(path):  # no fleet: nothing to check (a config folder of umask 002 is fine then)
        return []
    try:
        check_private_dir(path.parent)  # what runs (ssh options, the remote command) is in it
        data = read_private(path, MAX_BYTES)
    except FileNotFoundError:
        return []
    except (ParseError, OSError) as exc:
        raise HostsFileError(f"{path}: {exc}") from None
    try:
        return entries_from_json(load_json(data, str(path)))
    except (HostError, ValueError) as exc:
        raise HostsFileError(f"{path}: {exc} (fix it, or remove it and add the hosts again)") from None


def write_hosts(path: Path, entries: list[HostEntry]) -> None:
    """Replace the hosts in ``path`` (its folder made private first)."""
    try:
        private_dir(path.parent)
        atomic_write(path, (dump_json({"hosts": [e.to_json() for e in entries]}, indent=2) + "\n").encode())
    except OSError as exc:
        raise HostsFileError(f"{path} could not be written ({exc}); the hosts are unchanged") from None


def add_host(path: Path, entry: HostEntry) -> None:
    """Add ``entry``; HostsFileError when its name is taken or the file is full."""
    entries = read_hosts(path)
    if any(e.name == entry.name for e in entries):
        raise HostsFileError(f"a host is already named {entry.name!r}: `polypilot hosts rm {entry.name}` first")
    if len(entries) >= MAX_HOSTS:
        raise HostsFileError(f"{path} holds {MAX_HOSTS} hosts, the most a fleet has")
    write_hosts(path, [*entries, entry])


def remove_host(path: Path, name: str) -> HostEntry:
    """Remove the host ``name`` and return it; HostsFileError when there is none."""
    entries = read_hosts(path)
    kept = [e for e in entries if e.name != name]
    if len(kept) == len(entries):
        raise HostsFileError(f"no host {name!r} (see `polypilot hosts ls`)")
    write_hosts(path, kept)
    return next(e for e in entries if e.name == name)


def find_host(path: Path, name: str) -> HostEntry:
    """The host ``name``; HostsFileError listing the names otherwise."""
    entries = read_hosts(path)
    for entry in entries:
        if entry.name == name:
            return entry
    known = ", ".join(e.name for e in entries) or "none yet: `polypilot hosts add NAME [USER@]HOST[:PORT]`"
    raise HostsFileError(f"no host {name!r} (hosts: {known})")
