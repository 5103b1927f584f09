"""Entry points: ``polypilot`` (the dashboard), ``run``, ``replay``, ``status``, ``agents``."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import structs

from polypilot_tui.config import (
    CONFIG_FILE,
    AgentCatalog,
    AgentsFileError,
    ConfigFileError,
    InvalidSettings,
    Settings,
    SettingsError,
    config_dir,
)
from polypilot_tui.domain.limits import PROMPT_BYTES, size_words
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.trace import MAX_BYTES, TraceError
from polypilot_tui.infra import event_loop
from polypilot_tui.infra.logs import setup_file_logging, setup_stderr_logging
from polypilot_tui.infra.private import NotPrivate, check_private_dir, check_private_socket
from polypilot_tui.infra.redact import REDACTOR

if TYPE_CHECKING:
    import subprocess

    from polypilot_tui.agents.head_start import EarlyCli
    from polypilot_tui.domain.hosts import HostEntry
    from polypilot_tui.domain.sandbox import Sandbox
    from polypilot_tui.service.spawn import EarlyEngine

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BUSY = 3
"""Another dashboard holds the state folder."""
EXIT_NOT_PRIVATE = 7
"""The state folder (a folder above it, or its engine's socket) is another user's or others can write it."""
STATELESS_COMMANDS = ("replay", "agents", "config", "web", "hosts")
"""Commands that keep nothing in the state folder and talk to no engine of it."""
STDIN = "-"
"""The prompt argument that reads the prompt from standard input."""
PROMPT_HELP = 'the prompt; "-" reads it from standard input (for one over the 128 KiB an argument may hold)'


RUN_DESCRIPTION = """\
One headless turn, streamed; exit codes: 0 completed, 1 not completed, 2 usage, 3 completed
but a permission was refused, 4 cancelled.

With --fan-out: the task to a new session per attempt, each in a new worktree of --folder's
repository from the same base; waits for every attempt, runs --check in each worktree, prints
a JSON summary (each attempt's session, agent, branch, end and reason, seconds, usage, diff
stats, check) and keeps the worktrees. Exit codes: 0 every attempt completed (and passed the
check), 1 one did not complete, 2 usage (nothing made), 3 all completed but a permission was
refused (nobody is asked here: --allow-tools allows them), 4 cancelled, 5 all completed but a
check failed."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polypilot", description=("Drive several coding-agent sessions at once and keep every one of them honest.")
    )
    parser.add_argument("--agents-file", type=Path, help="TOML file of agents (or POLYPILOT_AGENTS_FILE)")
    parser.add_argument("--log-file", type=Path, help="write a debug log here")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser(
        "run",
        help="one headless turn: stream it, exit 0 only if it completed (--fan-out: one task to several agents)",
        description=RUN_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--agent", default=None, help="agent name (default: the configured default agent)")
    run.add_argument("--json", action="store_true", help="print JSONL events instead of text")
    run.add_argument("--allow-tools", action="store_true", help="allow every permission request")
    add_sandbox_option(run)
    run.add_argument("prompt", help=PROMPT_HELP)
    fan = run.add_argument_group("fan-out: the task to several agents, each in a new worktree; a JSON summary")
    fan.add_argument("--fan-out", metavar="AGENT:N,…", help="the attempts, e.g. copilot:2,opencode:1")
    add_worktree_options(fan)
    replay = sub.add_parser("replay", help="run a trace through the manager and watchdog in virtual time")
    replay.add_argument("trace", type=Path)
    replay.add_argument("--json", action="store_true", help="one JSON object per line")
    replay.add_argument("--horizon", type=float, default=4 * 3600.0, help="virtual seconds to run at most")
    status = sub.add_parser("status", help="the sessions' status from the registry, without the TUI")
    status.add_argument("--json", action="store_true")
    agents = sub.add_parser("agents", help="every known agent and what each needs to run here")
    agents.add_argument("--json", action="store_true")
    config = sub.add_parser("config", help="the files in use and the settings in effect (secrets redacted)")
    config.add_argument("--json", action="store_true")
    new = sub.add_parser("new", help="add a session in a folder, or in a new git worktree of it")
    new.add_argument("--agent", default=None, help="agent name (default: the configured default agent)")
    new.add_argument("--name", default=None, help="the session's name")
    new.add_argument("--cwd", default=".", help="the folder (default: this one)")
    new.add_argument("--worktree", action="store_true", help="work in a new worktree on a new branch")
    new.add_argument("--branch", default=None, help="the new branch (default: polypilot/<name>)")
    new.add_argument("--base", default="", help="where the branch starts (default: the checked-out branch)")
    add_sandbox_option(new)
    diff = sub.add_parser("diff", help="a session's changes against its base (committed, uncommitted, new)")
    diff.add_argument("session", help="id or name")
    diff.add_argument("--stat", action="store_true", help="a line per file and the totals")
    done = sub.add_parser("finish", help="commit, merge, push, open a pull request for, or discard a worktree")
    done.add_argument("session", help="id or name")
    done.add_argument("action", choices=["commit", "merge", "push", "pr", "discard"])
    done.add_argument("-m", "--message", default=None, help="commit message or pull request body")
    done.add_argument("--ff-only", action="store_true", help="merge: fast-forward only")
    done.add_argument("--force", action="store_true", help="discard: even with uncommitted or unpushed work")
    done.add_argument("--remote", default="origin", help="push: the remote")
    sub.add_parser("serve", help="run the engine in this process (the dashboard starts one by itself)")
    engine = sub.add_parser("engine", help="the engine service: start it detached, see it, stop it")
    engine.add_argument("action", choices=["start", "status", "stop"])
    engine.add_argument("--json", action="store_true")
    add_session_commands(sub)
    add_hosts_command(sub)
    for command in HOST_COMMANDS:  # after the commands: each talks to an engine, here or on a host
        sub.choices[command].add_argument("--host", metavar="NAME", help="the engine of this host (polypilot hosts)")
    web = sub.add_parser("web", help="serve the dashboard to a browser on 127.0.0.1, behind a printed token")
    web.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    web.add_argument("--host", default="127.0.0.1", help="127.0.0.1, localhost or ::1 (loopback only)")
    parser.add_argument(
        "--in-process", action="store_true", help="run the engine inside the dashboard (sessions end with it)"
    )
    parser.add_argument("--ssh", metavar="[USER@]HOST[:PORT]", help="attach to the engine on another machine over ssh")
    parser.add_argument(
        "--remote-command", default="polypilot", help="--ssh: how polypilot is run there (default: polypilot)"
    )
    parser.add_argument("--ssh-option", action="append", default=[], help="--ssh: an option for ssh (e.g. -F FILE)")
    parser.add_argument(
        "--host",
        dest="dashboard_host",
        metavar="NAME",
        help="the dashboard on this host's engine alone (polypilot hosts)",
    )
    return parser


def add_hosts_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``hosts add|ls|rm``: the machines ``polypilot`` attaches to besides this one (commands/hosts.py)."""
    hosts = sub.add_parser(
        "hosts",
        help="the machines the dashboard attaches to besides this one: add NAME [USER@]HOST[:PORT], ls, rm NAME",
    )
    hosts.add_argument("action", choices=["add", "ls", "rm"])
    hosts.add_argument("name", nargs="?", help="the host's name (a-z, 0-9, - and _)")
    hosts.add_argument("target", nargs="?", help="add: [USER@]HOST[:PORT] (or an alias of your ssh config)")
    hosts.add_argument("--remote-command", default="polypilot", help="add: how polypilot is run there")
    hosts.add_argument(
        "--ssh-option", action="append", default=[], help="add: an option for ssh to that host (e.g. -F FILE)"
    )
    hosts.add_argument("--json", action="store_true", help="ls: a JSON array")


def add_session_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``ls``, ``send``, ``stop``, ``reconnect``, ``close``, ``answer``, ``follow``, ``model``,
    ``clear-queue``: the dashboard's actions against the state folder's engine
    (commands/sessions.py, commands/follow.py)."""
    ls = sub.add_parser("ls", help="the sessions of the running engine")
    ls.add_argument("--json", action="store_true", help="a JSON array of views")
    ls.add_argument(
        "--all-hosts", action="store_true", help="every host's too, with a HOST column (JSON: a host field)"
    )
    send = sub.add_parser("send", help="send a prompt to a session, or (--to) to several (queued while a turn runs)")
    send.add_argument("session", help="id or name (with --to: the prompt)")
    send.add_argument("prompt", nargs="?", help=PROMPT_HELP)
    send.add_argument(
        "--to", metavar="ID,ID,…", help="send to each of these sessions (a line each; exit 1 if any refused)"
    )
    send.add_argument("--wait", action="store_true", help="stream the turn and exit with `run`'s codes")
    send.add_argument("--json", action="store_true", help="--wait: JSONL events instead of text; --to: a JSON array")
    send.add_argument("--timeout", type=float, default=None, help="--wait: give up waiting after S seconds (exit 1)")
    for name, what in (
        ("clear-queue", "drop every prompt queued in a session (its running turn goes on)"),
        ("stop", "stop a session's turn"),
        ("reconnect", "reconnect a session's agent"),
        ("close", "close a session"),
    ):
        sub.add_parser(name, help=what).add_argument("session", help="id or name")
    answer = sub.add_parser("answer", help="answer a session's pending permission (no OPTION: list them, exit 2)")
    answer.add_argument("session", help="id or name")
    answer.add_argument("option", nargs="?", help="an option id, or the unique start of an id or label")
    model = sub.add_parser("model", help="a session's models (* marks the current one), or switch with MODEL")
    model.add_argument("session", help="id or name")
    model.add_argument("model", nargs="?", help="the model id to switch to (from the next turn)")
    follow = sub.add_parser("follow", help="a session's history, then its turns live (ctrl+c ends it)")
    follow.add_argument("session", help="id or name")
    follow.add_argument("--json", action="store_true", help="JSONL rows and events")
    add_team_command(sub)
    add_fan_out_commands(sub)


def add_team_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``team``: make a session an orchestrator with a budget for its tree of workers (commands/team.py)."""
    team = sub.add_parser(
        "team",
        help="make a session an orchestrator (its team as JSON; again: changes only the bounds named), "
        "--show it, --stop-workers",
    )
    team.add_argument("session", help="id or name")
    team.add_argument("--workers-at-once", type=int, help="workers working at once; more starts queue (2)")
    team.add_argument("--total", type=int, help="workers started in all (6)")
    team.add_argument("--depth", type=int, help="1: workers cannot orchestrate; 2: their workers cannot… (1)")
    team.add_argument("--turns", type=int, help="turns across the tree (40)")
    team.add_argument("--minutes", type=float, help="wall time of the orchestration (60)")
    team.add_argument("--tokens", type=int, help="tokens across the tree, as agents report them (unbounded)")
    team.add_argument("--cost", type=float, help="money across the tree, as agents report it (unbounded)")
    what = team.add_mutually_exclusive_group()
    what.add_argument("--show", action="store_true", help="print its team as JSON, changing nothing")
    what.add_argument("--stop-workers", action="store_true", help="stop every worker of its team")


def add_worktree_options(fan: argparse._ActionsContainer) -> None:
    """Where a fan-out's attempts work and what checks them (``run --fan-out`` and ``fan-out``)."""
    fan.add_argument("--folder", default=".", help="the git repository (default: this folder)")
    fan.add_argument("--base", default="", help="where each attempt's branch starts (default: the checked-out one)")
    fan.add_argument("--check", default="", metavar="CMD", help="run in each worktree as its attempt ends (your shell)")
    fan.add_argument(
        "--check-timeout", type=float, default=None, metavar="S", help="kill the check after S seconds (600)"
    )


def add_sandbox_option(parser: argparse._ActionsContainer) -> None:
    """``--sandbox off|workspace`` (docs/sandbox.md); unset: the agent's own (its ``sandbox``)."""
    parser.add_argument(
        "--sandbox",
        choices=("off", "workspace"),
        default=None,
        help="run the agent in a sandbox: it writes only its folder or worktree (default: the agent's setting)",
    )
    parser.add_argument(
        "--network",
        default=None,
        metavar="HOST:PORT,…",
        help="a sandbox whose agent reaches only these endpoints and its model's ('' for the model's alone)",
    )


def sandbox_choice(args: argparse.Namespace) -> Sandbox | None:
    """The sandbox ``--sandbox`` and ``--network`` ask for, None when neither is given (the
    agent's own). ``--network`` alone means the workspace sandbox, which keeps the rule; with
    ``--sandbox off`` it is refused when the session is made, never run as no rule."""
    if args.sandbox is None and args.network is None:
        return None
    from polypilot_tui.domain.sandbox import Sandbox, SandboxMode  # only then: a plain run loads less

    mode = SandboxMode(args.sandbox) if args.sandbox is not None else SandboxMode.WORKSPACE
    if args.network is None:
        return Sandbox(mode)
    return Sandbox(mode, tuple(entry.strip() for entry in args.network.split(",") if entry.strip()))


def check_timeout(args: argparse.Namespace) -> float:
    """--check-timeout, or the default (imported only by the commands that check)."""
    from polypilot_tui.domain.fan_out import CHECK_TIMEOUT

    given: float | None = args.check_timeout
    return CHECK_TIMEOUT if given is None else given


def add_fan_out_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``fan-out``, ``compare`` and ``pick``: a fan-out's attempts (commands/fan_out.py)."""
    fan = sub.add_parser(
        "fan-out", help="one task to several agents in the engine, each in a new worktree; the group's id"
    )
    fan.add_argument("agents", metavar="AGENT:N,…", help="the attempts, e.g. copilot:2,opencode:1")
    fan.add_argument("prompt", help=PROMPT_HELP)
    add_worktree_options(fan)
    add_sandbox_option(fan)
    compare = sub.add_parser("compare", help="a fan-out's attempts side by side: status, time, usage, changes, check")
    compare.add_argument("group", help="the fan-out's id")
    compare.add_argument("--check", action="store_true", help="run its check command in each attempt first")
    compare.add_argument("--json", action="store_true")
    pick = sub.add_parser("pick", help="merge one attempt of a fan-out into its base (its work committed first)")
    pick.add_argument("group", help="the fan-out's id")
    pick.add_argument("session", help="the attempt: its session's id or name")
    pick.add_argument("--discard-others", action="store_true", help="remove the other attempts' worktrees and branches")
    pick.add_argument("--force", action="store_true", help="--discard-others: even those with work at risk")
    pick.add_argument("-m", "--message", default=None, help="the commit message of its uncommitted work")


def cmd_session(args: argparse.Namespace, settings: Settings) -> int:
    """The session commands (commands/sessions.py, commands/follow.py)."""
    from polypilot_tui.commands import follow, model_switch, sessions

    if args.command == "ls" and args.all_hosts:
        from polypilot_tui.commands.hosts import cmd_ls_all_hosts
        from polypilot_tui.service.hosts_file import hosts_path, read_hosts

        return event_loop.run(cmd_ls_all_hosts(settings, read_hosts(hosts_path()), args.json))
    if args.command == "ls":
        return event_loop.run(sessions.cmd_ls(settings, args.json))
    if args.command == "send" and args.to is not None:
        from polypilot_tui.commands.fan_out import cmd_broadcast

        return event_loop.run(cmd_broadcast(settings, args.to, args.prompt, json_mode=args.json))
    if args.command == "fan-out":
        from polypilot_tui.commands.fan_out import cmd_fan_out

        made = cmd_fan_out(
            settings,
            args.agents,
            args.prompt,
            folder=args.folder,
            base=args.base,
            check=args.check,
            check_timeout=check_timeout(args),
            sandbox=sandbox_choice(args),
        )
        return event_loop.run(made)
    if args.command == "compare":
        from polypilot_tui.commands.fan_out import cmd_compare

        return event_loop.run(cmd_compare(settings, args.group, check=args.check, json_mode=args.json))
    if args.command == "pick":
        from polypilot_tui.commands.fan_out import cmd_pick

        pick = cmd_pick(
            settings,
            args.group,
            args.session,
            discard_others=args.discard_others,
            force=args.force,
            message=args.message,
        )
        return event_loop.run(pick)
    if args.command == "send":
        send = follow.cmd_send(
            settings, args.session, args.prompt, wait=args.wait, json_mode=args.json, timeout=args.timeout
        )
        return event_loop.run(send)
    if args.command == "answer":
        return event_loop.run(sessions.cmd_answer(settings, args.session, args.option))
    if args.command == "follow":
        return event_loop.run(follow.cmd_follow(settings, args.session, args.json))
    if args.command == "model":
        return event_loop.run(model_switch.cmd_model(settings, args.session, args.model))
    if args.command == "clear-queue":
        return event_loop.run(sessions.cmd_clear_queue(settings, args.session))
    if args.command == "team":
        from polypilot_tui.commands import team

        given = team.bounds_given(
            args.workers_at_once, args.total, args.depth, args.turns, args.minutes, args.tokens, args.cost
        )
        return event_loop.run(team.cmd_team(settings, args.session, given, args.show, args.stop_workers))
    return event_loop.run(sessions.cmd_act(settings, args.session, args.command))


SESSION_COMMANDS = (
    "ls",
    "send",
    "stop",
    "reconnect",
    "close",
    "answer",
    "follow",
    "model",
    "clear-queue",
    "fan-out",
    "compare",
    "pick",
    "team",
)
"""The commands that act on the sessions of a running engine."""
HOST_COMMANDS = (*SESSION_COMMANDS, "new", "diff", "finish")
"""The commands that talk to an engine: each takes ``--host NAME`` (commands/live.py HOST)."""


def load_settings(args: argparse.Namespace, env_file: bool = True) -> Settings:
    """Settings from the environment (and ``.env``), or a clear error naming the field."""
    try:
        settings = Settings.read() if env_file else Settings.read(None)
    except InvalidSettings as exc:
        # msgspec's message repeats a refused choice: a key pasted into the wrong variable
        # (or a secret-named variable's value) must not reach the terminal or a CI log.
        REDACTOR.learn_environment()
        problems = REDACTOR.text(str(exc))
        where = f"POLYPILOT_* variables, .env or {config_dir() / CONFIG_FILE}"
        print(f"polypilot: invalid setting ({problems}) in {where}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    except SettingsError as exc:  # a nested setting that is not even JSON: POLYPILOT_WATCHDOG={
        cause = f": {exc.__cause__}" if exc.__cause__ is not None else ""
        print(f"polypilot: invalid setting ({exc.field}: not valid JSON{cause}) in {exc.source}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    except ConfigFileError as exc:
        print(f"polypilot: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    if args.agents_file is not None:
        settings = structs.replace(settings, agents_file=args.agents_file)
    return settings


def load_catalog(settings: Settings) -> AgentCatalog:
    """The built-in catalog and the user's agents file, or a clear error naming the file."""
    from polypilot_tui.agents.catalog import load_catalog as catalog_of

    try:
        return catalog_of(settings)
    except AgentsFileError as exc:
        print(f"polypilot: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


def main(argv: Sequence[str] | None = None, early: EarlyCli | None = None, engine: EarlyEngine | None = None) -> int:
    """Run the command; a stdout closed under it (``polypilot status | head -1``) ends it quietly.
    ``early``: a ``run``'s CLI, ``engine``: a plain start's engine, started before the settings
    were read (entry.py)."""
    from polypilot_tui.commands.output import EXIT_STDOUT_CLOSED, stdout_to_devnull

    try:
        code = _command(argv, early, engine)
        sys.stdout.flush()  # a reader that left shows here, not in the interpreter's last flush
    except BrokenPipeError:
        stdout_to_devnull()
        return EXIT_STDOUT_CLOSED
    except NotPrivate as exc:  # found on the way (a link at engine.err, another user listening on its socket)
        print(f"polypilot: {exc}", file=sys.stderr)
        return EXIT_NOT_PRIVATE
    return code


def refuse_foreign_state(settings: Settings) -> None:
    """Exit with a message naming the path, what is wrong and the fix, before anything touches
    the state folder, when it (or a folder above it, or the engine's socket in it) is another
    user's or others can write it. Nothing is created: ``status`` only reads."""
    from polypilot_tui.service.address import socket_path

    state = Path(settings.state_dir)
    try:
        check_private_dir(state)
        if os.path.lexists(socket_path(state)):
            check_private_socket(socket_path(state))
    except NotPrivate as exc:
        print(f"polypilot: refusing the state folder: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_NOT_PRIVATE) from None


def send_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``send SESSION PROMPT``, or ``send --to A,B PROMPT`` (its one argument is the prompt)."""
    if args.to is not None:
        if args.prompt is not None:
            parser.error("send --to takes the prompt alone (the sessions are in --to)")
        if args.wait or args.timeout is not None:
            parser.error("send --to does not wait: follow each session with `polypilot follow`")
        args.prompt, args.session = args.session, None
    elif args.prompt is None:
        parser.error("send: name the session and give the prompt")


def prompt_from_stdin() -> str:
    """Standard input, whole, as the prompt (``-``): a prompt longer than one argument may be
    (the kernel takes 128 KiB) comes this way. More than a prompt may hold is refused unkept,
    never cut; text that is not UTF-8 is refused, never mangled."""
    data = sys.stdin.buffer.read(PROMPT_BYTES + 1)
    if len(data) > PROMPT_BYTES:
        print(
            f"polypilot: standard input holds more than {size_words(PROMPT_BYTES)}, the most one prompt may "
            "hold; nothing was sent (put the text in a file and give the agent its path)",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_USAGE)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        print(f"polypilot: standard input is not UTF-8 text (at byte {exc.start}); nothing was sent", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


def _ssh_options_joined(argv: Sequence[str]) -> list[str]:
    """``--ssh-option -F`` as ``--ssh-option=-F``: argparse takes a value starting with ``-``
    for another option ("expected one argument"), yet every ssh option starts with one."""
    joined: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--":
            joined += [word, *words]
            break
        value = next(words, None) if word == "--ssh-option" else None
        joined.append(word if value is None else f"{word}={value}")
    return joined


def _command(argv: Sequence[str] | None, early: EarlyCli | None = None, engine: EarlyEngine | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_ssh_options_joined(sys.argv[1:] if argv is None else argv))
    headless_run = args.command == "run" and args.fan_out is None
    if args.command not in (None, "serve") and not headless_run:  # they turn them on once started
        gc.enable()  # (entry.py)
    if args.command == "send":
        send_arguments(parser, args)
    if getattr(args, "prompt", None) == STDIN:
        args.prompt = prompt_from_stdin()
    if args.command in ("replay", "status", "agents", "config", "engine", *HOST_COMMANDS):
        if args.log_file:
            setup_file_logging(Path("."), "", extra_file=args.log_file)
        else:
            setup_stderr_logging()  # short commands: warnings as one redacted line, no traceback
    if args.command == "replay":
        return cmd_replay(args)
    if args.command == "hosts":
        from polypilot_tui.commands.hosts import cmd_hosts

        return cmd_hosts(args.action, args.name, args.target, args.remote_command, args.ssh_option, args.json)
    settings = load_settings(args)
    host = aimed_host(args)
    if args.command not in STATELESS_COMMANDS:
        refuse_foreign_state(settings)
    if args.command == "run":
        from polypilot_tui.commands.run import run_headless

        catalog = load_catalog(settings)
        # The agents' output and the SDKs' tracebacks go to the log, never the job's terminal.
        setup_file_logging(Path(settings.state_dir), "run.log", extra_file=args.log_file)
        code = (
            cmd_fan_out(args, settings, catalog)
            if args.fan_out is not None
            else event_loop.run(
                run_headless(
                    settings,
                    catalog,
                    args.agent or settings.default_agent,
                    args.prompt,
                    json_mode=args.json,
                    allow_tools=args.allow_tools,
                    sandbox=sandbox_choice(args),
                    early=early,
                )
            )
        )
        # The run is over and the process ends: the interpreter's last collection would walk
        # every object alive (the Copilot SDK's ~2,000 generated classes), 0.1-0.3 s for nothing.
        gc.freeze()
        return code
    if args.command == "status":
        from polypilot_tui.commands.status import print_status

        return print_status(settings, json_mode=args.json)
    if args.command == "agents":
        from polypilot_tui.commands.agents import print_agents

        return print_agents(load_catalog(settings), json_mode=args.json)
    if args.command == "config":
        from polypilot_tui.commands.config_show import show_config

        given = frozenset({"agents_file"} if args.agents_file is not None else ())
        return show_config(settings, json_mode=args.json, given=given)
    if args.command in ("new", "diff", "finish"):
        return cmd_workspace(args, settings)
    if args.command in SESSION_COMMANDS:
        return cmd_session(args, settings)
    if args.command in ("serve", "engine"):
        from polypilot_tui.commands.engine import cmd_engine, cmd_serve

        if args.command == "engine":
            return cmd_engine(settings, args.action, args.json)
        setup_file_logging(Path(settings.state_dir), "engine.log", logging.INFO, extra_file=args.log_file)
        return cmd_serve(settings, load_catalog(settings))
    if args.command == "web":
        from polypilot_tui.service.web import run_web

        return run_web(args.host, args.port, Path(settings.state_dir), args.agents_file, args.in_process)
    if args.in_process:
        return cmd_tui(settings, args.log_file)
    if args.ssh or host is not None:
        from polypilot_tui.service.attach import SshAttach
        from polypilot_tui.ui.launch import run_over_ssh

        setup_file_logging(Path(settings.state_dir), "dashboard.log", extra_file=args.log_file)
        attach = (
            SshAttach(host.target, host.remote_command, host.ssh_options)
            if host is not None
            else SshAttach(args.ssh, args.remote_command, args.ssh_option)
        )
        return run_over_ssh(settings, attach)
    entries = hosts_or_exit()
    if entries:
        setup_file_logging(Path(settings.state_dir), "dashboard.log", extra_file=args.log_file)
        spawned = spawn_early(settings, engine)
        from polypilot_tui.ui.launch import run_fleet

        return run_fleet(settings, entries, args.ssh_option, spawned)
    return cmd_attach(settings, args.log_file, engine)


def hosts_or_exit() -> list[HostEntry]:
    """The hosts file's hosts, or a clear error naming it (exit 2)."""
    from polypilot_tui.service.hosts_file import HostsFileError, hosts_path, read_hosts

    try:
        return read_hosts(hosts_path())
    except HostsFileError as exc:
        print(f"polypilot: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


def aimed_host(args: argparse.Namespace) -> HostEntry | None:
    """The host ``--host NAME`` names (a command's, or the dashboard's), set as the commands'
    engine (commands/live.py HOST); None without ``--host``. Exit 2 for a name not in the hosts."""
    name = getattr(args, "host", None) if args.command in HOST_COMMANDS else None
    name = name or args.dashboard_host
    if not name:
        return None
    from polypilot_tui.commands.live import HOST
    from polypilot_tui.service.hosts_file import HostsFileError, find_host, hosts_path

    if args.command is None and args.ssh:
        print("polypilot: --host and --ssh name two machines: give one", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    if args.dashboard_host and (args.command not in (None, *HOST_COMMANDS) or getattr(args, "in_process", False)):
        # Never run here what was aimed at another machine (`polypilot --host ci engine stop`).
        what = "--in-process" if args.command is None else args.command
        print(
            f"polypilot: --host does not apply to {what}: it aims the dashboard and "
            f"{', '.join(HOST_COMMANDS)} at a host",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_USAGE)
    if getattr(args, "all_hosts", False):
        print("polypilot: ls --all-hosts lists every host already: drop --host", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    try:
        entry = find_host(hosts_path(), name)
    except HostsFileError as exc:
        print(f"polypilot: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    HOST.set(entry)
    return entry


def cmd_fan_out(args: argparse.Namespace, settings: Settings, catalog: AgentCatalog) -> int:
    """``run --fan-out`` (commands/fan_out_run.py)."""
    from polypilot_tui.commands.fan_out_run import run_fan_out

    if args.agent is not None or args.json:
        print("polypilot run: --fan-out names its agents and prints JSON: no --agent, no --json", file=sys.stderr)
        return EXIT_USAGE
    fan_out = run_fan_out(
        settings,
        catalog,
        args.fan_out,
        args.prompt,
        folder=args.folder,
        base=args.base,
        check=args.check,
        check_timeout=check_timeout(args),
        allow_tools=args.allow_tools,
        sandbox=sandbox_choice(args),
    )
    return event_loop.run(fan_out)


def cmd_workspace(args: argparse.Namespace, settings: Settings) -> int:
    """``new``, ``diff`` and ``finish`` (commands/workspace.py)."""
    from polypilot_tui.commands import workspace

    if args.command == "new":
        return event_loop.run(
            workspace.cmd_new(
                settings,
                load_catalog(settings),
                args.agent or settings.default_agent,
                name=args.name,
                cwd=args.cwd,
                worktree=args.worktree,
                branch=args.branch,
                base=args.base,
                sandbox=sandbox_choice(args),
            )
        )
    if args.command == "diff":
        return event_loop.run(workspace.cmd_diff(settings, args.session, stat=args.stat))
    return event_loop.run(
        workspace.cmd_finish(
            settings,
            args.session,
            args.action,
            message=args.message,
            fast_forward_only=args.ff_only,
            force=args.force,
            remote=args.remote,
        )
    )


def cmd_replay(args: argparse.Namespace) -> int:
    from polypilot_tui.commands.replay import format_line, run_trace

    settings = load_settings(args, env_file=False)
    try:
        size = args.trace.stat().st_size
        if size > MAX_BYTES:
            print(
                f"polypilot replay: {args.trace} is {size:,} bytes; traces are limited to {MAX_BYTES:,} "
                "bytes (split it, or replay a recording, which stops at its cap)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        lines = args.trace.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        print(f"polypilot replay: cannot read {args.trace}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        result = event_loop.run(run_trace(lines, settings, horizon=args.horizon))
    except TraceError as exc:
        print(f"polypilot replay: {args.trace}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for item in [*result.timeline, {"final": result.final}]:
        print(dump_json(item) if args.json else format_line(item))
    return EXIT_OK


def cmd_tui(settings: Settings, log_file: Path | None = None) -> int:
    """The dashboard: take the state folder (or say who has it) before the terminal is touched."""
    from polypilot_tui.engine.persistence import QUIT_NOTES
    from polypilot_tui.storage.lock import StateFolderBusy, StateLock
    from polypilot_tui.storage.retention import prune_state_dir

    try:
        lock: StateLock | None = StateLock.acquire(Path(settings.state_dir))
    except StateFolderBusy as exc:
        print(
            f"polypilot: {exc}. Quit that one first, or give this one its own folder with POLYPILOT_STATE_DIR.",
            file=sys.stderr,
        )
        return EXIT_BUSY
    except NotPrivate:
        raise  # main() says why (exit 7): never a dashboard saving into another user's folder
    except OSError:
        lock = None  # the folder cannot even be created: the dashboard runs and says it cannot save
    setup_file_logging(Path(settings.state_dir), "polypilot.log", extra_file=log_file)
    if lock is not None:
        prune_state_dir(Path(settings.state_dir))
    from polypilot_tui.ui.launch import run_app

    try:
        return run_app(settings)
    finally:
        if lock is not None:
            lock.release()
        for note in QUIT_NOTES:  # the terminal is ours again: what could not be saved, and where it is
            print(note, file=sys.stderr)
        QUIT_NOTES.clear()


def cmd_attach(settings: Settings, log_file: Path | None = None, engine: EarlyEngine | None = None) -> int:
    """The dashboard, attached to the state folder's engine (started detached when none runs)."""
    setup_file_logging(Path(settings.state_dir), "dashboard.log", extra_file=log_file)
    spawned = spawn_early(settings, engine)
    from polypilot_tui.ui.launch import run_attached

    return run_attached(settings, spawned)


def spawn_early(settings: Settings, early: EarlyEngine | None = None) -> subprocess.Popen[bytes] | None:
    """The state folder's engine, started now when none runs, so that it loads while the
    dashboard's UI is imported (a plain start and a fleet's alike); None when one runs.
    ``early``: the one entry.py started already, taken when it is this folder's."""
    from polypilot_tui.service.spawn import engine_listening, spawn_engine

    claimed = early.claim(settings) if early is not None else None
    if claimed is not None:
        return claimed
    try:
        return None if engine_listening(settings) else spawn_engine(settings)
    except OSError:  # the folder cannot even be made: the dashboard's connect says so on screen
        return None


if __name__ == "__main__":
    raise SystemExit(main())
