"""Entry points: ``polypilot`` (the dashboard), ``run``, ``replay``, ``status``, ``agents``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Sequence

from pydantic import ValidationError

from polypilot_tui.config import AgentCatalog, AgentsFileError, Settings, load_agents
from polypilot_tui.core.trace import TraceError

EXIT_OK = 0
EXIT_TURN_FAILED = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="polypilot", description=(
        "Drive several coding-agent sessions at once and keep every one of them honest."))
    parser.add_argument("--agents-file", type=Path, help="TOML file of agents (or POLYPILOT_AGENTS_FILE)")
    parser.add_argument("--log-file", type=Path, help="write a debug log here")
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="one headless turn: stream it, exit 0 only if it completed")
    run.add_argument("--agent", default=None, help="agent name (default: the configured default agent)")
    run.add_argument("--json", action="store_true", help="print JSONL events instead of text")
    run.add_argument("--allow-tools", action="store_true", help="allow every permission request")
    run.add_argument("prompt")
    replay = sub.add_parser("replay", help="run a trace through the manager and watchdog in virtual time")
    replay.add_argument("trace", type=Path)
    replay.add_argument("--json", action="store_true", help="one JSON object per line")
    replay.add_argument("--horizon", type=float, default=4 * 3600.0, help="virtual seconds to run at most")
    status = sub.add_parser("status", help="the sessions' status from the registry, without the TUI")
    status.add_argument("--json", action="store_true")
    sub.add_parser("agents", help="list configured agents and whether each can run here")
    return parser


def load_settings(args: argparse.Namespace) -> Settings:
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        print(f"polypilot: invalid POLYPILOT_* setting ({problems})", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    if args.agents_file is not None:
        settings = settings.model_copy(update={"agents_file": args.agents_file})
    return settings


def load_catalog(settings: Settings) -> AgentCatalog:
    try:
        return load_agents(settings.agents_file)
    except AgentsFileError as exc:
        print(f"polypilot: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.log_file:
        logging.basicConfig(filename=args.log_file, level=logging.DEBUG,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "replay":
        return cmd_replay(args)
    settings = load_settings(args)
    if args.command == "run":
        from polypilot_tui.headless import run_headless
        catalog = load_catalog(settings)
        return asyncio.run(run_headless(settings, catalog, args.agent or settings.default_agent, args.prompt,
                                        json_mode=args.json, allow_tools=args.allow_tools))
    if args.command == "status":
        from polypilot_tui.status import print_status
        return print_status(settings, json_mode=args.json)
    if args.command == "agents":
        from polypilot_tui.headless import print_agents
        return print_agents(load_catalog(settings))
    return cmd_tui(settings)


def cmd_replay(args: argparse.Namespace) -> int:
    from polypilot_tui.replay import format_line, run_trace
    try:
        lines = args.trace.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        print(f"polypilot replay: cannot read {args.trace}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        result = asyncio.run(run_trace(lines, horizon=args.horizon))
    except TraceError as exc:
        print(f"polypilot replay: {args.trace}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for item in [*result.timeline, {"final": result.final}]:
        print(json.dumps(item, ensure_ascii=False) if args.json else format_line(item))
    return EXIT_OK


def cmd_tui(settings: Settings) -> int:
    from polypilot_tui.ui.app import run_app
    return run_app(settings)


if __name__ == "__main__":
    raise SystemExit(main())
