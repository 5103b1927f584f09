"""``polypilot hosts add|ls|rm`` (the fleet's machines) and ``polypilot ls --all-hosts``.

The hosts are kept in the config folder (service/hosts_file.py); every name and target is
checked before anything is written (domain/hosts.py). ``ls --all-hosts`` asks every engine
at once, each through its own ssh forward and bounded: a host that does not answer is one
line on stderr (exit 1), never a wait for the others.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path

from polypilot_tui.commands.live import EXIT_NO_ENGINE, CommandFailed, fail, reach
from polypilot_tui.commands.output import say
from polypilot_tui.commands.sessions import format_views
from polypilot_tui.commands.status import learn_secrets
from polypilot_tui.config import Settings
from polypilot_tui.domain.hosts import LOCAL, HostEntry, HostError
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.view import SessionView
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.service.hosts_file import HostsFileError, add_host, hosts_path, read_hosts, remove_host

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
LIST_TIMEOUT = 30.0
"""Seconds a host has to answer ``ls --all-hosts`` (its ssh, the engine's start, the list)."""


def cmd_hosts(
    action: str,
    name: str | None,
    target: str | None,
    remote_command: str,
    ssh_options: Sequence[str],
    json_mode: bool = False,
    path: Path | None = None,
) -> int:
    """``hosts add NAME TARGET``, ``hosts ls``, ``hosts rm NAME``; a refusal is one line on stderr."""
    where = path or hosts_path()
    try:
        if action == "add":
            if name is None or target is None:
                raise HostError("hosts add NAME [USER@]HOST[:PORT]: give both")
            entry = HostEntry.checked(name, target, remote_command, tuple(ssh_options))
            add_host(where, entry)
            say(
                f"added {entry.name} ({entry.target}); `polypilot` attaches to it, `--host {entry.name}` aims a command"
            )
        elif action == "rm":
            if name is None:
                raise HostError("hosts rm NAME: which host?")
            gone = remove_host(where, name)
            say(f"removed {gone.name} ({gone.target}); its engine there is left running")
        else:
            entries = read_hosts(where)
            if json_mode:
                say(dump_json([e.to_json() for e in entries], indent=2))
            elif not entries:
                say(f"no hosts ({where}); add one: polypilot hosts add NAME [USER@]HOST[:PORT]")
            else:
                for e in entries:
                    extra = "" if e.remote_command == "polypilot" else f"  (runs: {e.remote_command})"
                    say(f"{e.name:<16} {e.target}{extra}")
    except (HostError, HostsFileError) as exc:
        fail(str(exc))
        return EXIT_USAGE
    return EXIT_OK


async def cmd_ls_all_hosts(settings: Settings, entries: Sequence[HostEntry], json_mode: bool = False) -> int:
    """Every engine's sessions: Local's, then each host's in the hosts file's order (asked at once)."""

    async def one(entry: HostEntry | None) -> tuple[list[SessionView] | None, str]:
        try:
            async with asyncio.timeout(LIST_TIMEOUT), reach(settings, False, entry) as client:
                listed = await client.call(verbs.SESSIONS, verbs.NoArgs())
        except CommandFailed as exc:
            if entry is None and exc.code == EXIT_NO_ENGINE:
                return [], ""  # no engine runs here: no local sessions
            return None, str(exc)
        except (EngineError, OSError) as exc:
            return None, str(exc)
        except TimeoutError:
            return None, f"no answer within {LIST_TIMEOUT:g} s"
        # Each engine's clock is its own: its times are made relative to its "now" (0).
        return [_relative(view, listed.now) for view in listed.sessions], ""

    answers = await asyncio.gather(one(None), *(one(e) for e in entries))
    names = [LOCAL, *(e.name for e in entries)]
    learn_secrets(settings)
    rows: list[tuple[str, SessionView]] = []
    code = EXIT_OK
    for name, (found, error) in zip(names, answers, strict=True):
        if found is None:
            label = name or "Local"
            fail(error if error.startswith(f"{label}: ") else f"{label}: {error}")
            code = EXIT_FAILED
            continue
        rows.extend((name, view) for view in REDACTOR.scrub(found))
    if json_mode:
        say(dump_json([{"host": name, **view.to_json()} for name, view in rows], indent=2, ascii_only=True))
        return code
    if not rows:
        say("no sessions")
        return code
    table = format_views([view for _name, view in rows], 0.0).splitlines()
    hosts = ["HOST", *(one_line(name or "Local", 16) for name, _view in rows)]
    width = max(len(h) for h in hosts)
    say("\n".join(f"{h.ljust(width)}  {line}" for h, line in zip(hosts, table, strict=True)))
    return code


def _relative(view: SessionView, now: float) -> SessionView:
    at = view.last_activity_at
    return dataclasses.replace(view, last_activity_at=at - now) if at is not None else view
