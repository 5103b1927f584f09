"""Start an agent's process before the program that drives it has loaded (``polypilot run``).

A headless run's fixed cost is the agent's boot plus ours; started first, the agent boots
while the engine imports, and (the Copilot CLI) the SDK imports and connects meanwhile. The
session the run then opens joins what was started here, exactly as a second session joins
a running CLI (agents/copilot/server.py). Two steps:

1. :func:`start_early`, the command's first step (entry.py), before the settings'
   models, pydantic or the engine are imported: for a plain ``run`` only (its words read strictly),
   the settings' sources (infra/settings_sources.py, the same functions the models read them
   with) and the agent's raw table (agents/raw_agent.py: a Copilot agent with no
   sandbox, no network rule, nothing unusual) decide the CLI's command line, environment and
   folder, computed by the same functions as a session's; the CLI is started on them and sent
   nothing. Anything uncertain: nothing is started (step 2 starts it as before).
2. :func:`head_start`, once the settings and the catalog are validated and the run's checks
   passed: the CLI's spec is computed from them as a session computes it; an early CLI is
   taken only when what it was started with equals that spec, else it is killed and reaped
   before it was sent anything, and the right one is started. A run that ends before this
   step (bad settings, checks refused, a sandboxed agent) kills it too (:meth:`EarlyCli.discard`).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

    from polypilot_tui.agents.copilot.cli_spec import ServerSpec
    from polypilot_tui.config import AgentConfig

RUN_FLAGS = frozenset({"--json", "--allow-tools"})
"""The flags of ``run`` a head start takes as they are (they do not change how the agent starts)."""


class EarlyCli:
    """A Copilot CLI started before the settings were validated: what it was started with,
    and the process, which nothing has been written to until :meth:`claim` hands it over."""

    __slots__ = ("cwd", "process", "settled", "spec")

    def __init__(self, spec: ServerSpec, cwd: str, process: subprocess.Popen[bytes]) -> None:
        self.spec = spec
        self.cwd = cwd
        self.process = process
        self.settled = False
        """Claimed or discarded: it is no one's to kill or take any more."""

    def __repr__(self) -> str:  # the spec's environment may hold keys
        return f"<EarlyCli pid={self.process.pid} settled={self.settled}>"

    def claim(self, spec: ServerSpec, cwd: str) -> subprocess.Popen[bytes] | None:
        """The process, when it was started with exactly ``spec`` in ``cwd`` and still runs;
        otherwise it is killed and reaped, and None. Once."""
        if self.settled:
            return None
        if spec == self.spec and cwd == self.cwd and self.process.poll() is None:
            self.settled = True
            return self.process
        self.discard()
        return None

    def discard(self) -> None:
        """Kill and reap the process unless it was claimed (a no-op after :meth:`claim`)."""
        if self.settled:
            return
        self.settled = True
        from polypilot_tui.agents.copilot.runtime import kill_tree

        kill_tree(self.process)
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


def run_words(argv: Sequence[str]) -> tuple[str | None, str | None] | None:
    """``[--agents-file F] run [--agent A] [--json] [--allow-tools] PROMPT``: (F, A), each None
    when not given; None for any other command line (another option, ``-`` for the prompt,
    ``--sandbox``, ``--fan-out``, a second prompt, …)."""
    words = list(argv)
    agents_file: str | None = None
    agent: str | None = None
    while words and words[0] != "run":
        word = words.pop(0)
        if word == "--agents-file" and words and not words[0].startswith("-"):  # argparse takes no option as its value
            agents_file = words.pop(0)
        elif word.startswith("--agents-file="):
            agents_file = word.partition("=")[2]
        else:
            return None
    if not words:
        return None
    prompts = 0
    wants_value = False
    for word in words[1:]:
        if wants_value:  # the word after --agent is its value ("": the default agent), as argparse reads it
            if word.startswith("-"):
                return None
            agent, wants_value = word or None, False
        elif word == "--agent":
            wants_value = True
        elif word.startswith("--agent="):
            agent = word.partition("=")[2] or None
        elif word.startswith("-"):
            if word not in RUN_FLAGS:
                return None
        else:
            prompts += 1
    if prompts != 1 or wants_value:
        return None
    return agents_file, agent


def start_early(argv: Sequence[str]) -> EarlyCli | None:
    """Start the Copilot CLI of a plain ``polypilot run`` (``argv``: the command's words)
    now, read from the raw settings and agents file; None when anything is uncertain."""
    words = run_words(argv)
    if words is None:
        return None
    try:
        return _started(*words)
    except Exception:  # noqa: BLE001 - whatever it is, the validated path meets it and says it
        return None


def _started(agents_file: str | None, agent_name: str | None) -> EarlyCli | None:
    from polypilot_tui.agents.catalog import builtin_tables
    from polypilot_tui.agents.copilot.cli_spec import cli_environment, server_cwd, spec_of
    from polypilot_tui.agents.copilot.spawn import spawn_cli
    from polypilot_tui.agents.locate import find_command
    from polypilot_tui.agents.raw_agent import plain_copilot
    from polypilot_tui.infra import settings_sources as sources

    settings = sources.gathered_settings({}, sources.DOTENV_FILE)  # as Settings() gathers them
    named = settings.get("agents_file") if agents_file is None else agents_file
    default = settings.get("default_agent", sources.DEMO_AGENT)
    if not isinstance(named, str | None) or named == "" or not isinstance(default, str):
        return None
    name = agent_name or default
    if named is not None:
        path: Path | None = Path(named).expanduser()
    else:
        path = sources.config_dir() / sources.AGENTS_FILE
        path = path if path.is_file() else None
    tables = {} if path is None else sources.read_toml_text(path, "", sources.MAX_AGENTS_FILE_BYTES, ValueError)[0]
    own = tables.get(name, {})
    if name == sources.DEMO_AGENT or not isinstance(own, dict):
        return None
    agent = plain_copilot(name, builtin_tables().get(name, {}) | own)
    if agent is None or agent.missing_key(os.environ):  # its key is the run's check: said there, nothing started
        return None
    if agent.provider is None and {**os.environ, **agent.env}.get(sources.PROVIDER_URL_VARIABLE, "").strip():
        return None  # a provider the CLI's own variables describe: the models read it
    cli = find_command(agent)
    if not cli:
        return None
    env, provider = cli_environment(agent, os.environ)
    spec = spec_of(agent, cli, env, logged_in=provider is None)
    cwd = server_cwd()
    process = spawn_cli(list(spec.argv), dict(spec.env), cwd, use_logged_in_user=spec.logged_in)
    return EarlyCli(spec, cwd, process)


async def _nothing() -> None:
    """Nothing was started, so nothing is given up."""


def head_start(agent: AgentConfig, early: EarlyCli | None = None) -> Callable[[], Awaitable[None]]:
    """Start ``agent``'s process now, on the running loop, for the session that will ask for it
    next — the ``early`` one when it was started exactly so, which is killed otherwise; returns
    what gives it up (a process no session joined is stopped there). What cannot start is left
    to the session's own start, which says why."""
    try:
        return _head_start(agent, early)
    finally:
        if early is not None:
            early.discard()  # a no-op once taken


def _head_start(agent: AgentConfig, early: EarlyCli | None) -> Callable[[], Awaitable[None]]:
    if agent.kind != "copilot":  # an ACP agent's process is its session's own (its folder, its env)
        return _nothing
    from polypilot_tui.agents.base import BackendError
    from polypilot_tui.agents.copilot.cli_spec import cli_environment, server_cwd, spec_of
    from polypilot_tui.agents.copilot.server import HeadStart
    from polypilot_tui.agents.locate import find_command

    cli = find_command(agent)
    if not cli:
        return _nothing
    try:
        env, provider = cli_environment(agent, os.environ)
        spec = spec_of(agent, cli, env, logged_in=provider is None)
        held = HeadStart(spec, early.claim(spec, server_cwd()) if early is not None else None)
    except (BackendError, OSError):
        return _nothing
    from polypilot_tui.infra.redact import REDACTOR

    REDACTOR.learn_agents([agent])  # what the CLI prints of its key is redacted in our logs
    return held.release
