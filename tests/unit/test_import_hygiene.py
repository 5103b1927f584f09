"""domain/ never imports Textual, Rich, an SDK or another layer; the demo path never loads an SDK.

import-linter checks the import graph statically (``make test``); this checks it at run time.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import polypilot_tui
from tests.agents.acp_support import FAKE_AGENT

CORE = Path(polypilot_tui.__file__).parent / "domain"
FORBIDDEN = (
    "textual",
    "rich",
    "copilot",
    "acp",
    "polypilot_tui.ui",
    "polypilot_tui.agents",
    "polypilot_tui.engine",
    "polypilot_tui.storage",
    "polypilot_tui.infra",
    "polypilot_tui.config",
    "polypilot_tui.commands",
)


def test_core_modules_load_without_ui_or_sdk() -> None:
    modules = sorted(f"polypilot_tui.domain.{p.stem}" for p in CORE.glob("*.py") if p.stem != "__init__")
    assert len(modules) >= 10
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich', 'copilot', 'acp') "
        f"or m.startswith({FORBIDDEN[4:]!r}))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"core pulled in: {out}"


def test_core_source_has_no_forbidden_imports() -> None:
    offenders = []
    for path in CORE.glob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")):
                target = stripped.split()[1]
                if target.startswith(FORBIDDEN) and "TYPE_CHECKING" not in line:
                    offenders.append(f"{path.name}:{number}: {stripped}")
    assert offenders == []


def test_demo_agent_needs_no_sdk() -> None:
    code = (
        "import sys\n"
        "from polypilot_tui.agents import create_backend\nimport polypilot_tui.agents.demo.backend\n"
        "import polypilot_tui.engine.manager\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('copilot', 'acp'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


FIRST_PARTY = ("polypilot_tui", "tests", "bench")


@pytest.mark.slow
def test_no_module_imports_a_private_name_of_another() -> None:
    """``from x import _y`` couples to what x keeps the right to change (ruff's SLF001 sees only attributes)."""
    root = Path(polypilot_tui.__file__).parents[1]
    offenders = []
    for folder in ("polypilot_tui", "tests", "bench"):
        for path in (root / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FIRST_PARTY:
                    offenders += [
                        f"{path.relative_to(root)}:{node.lineno}: {alias.name}"
                        for alias in node.names
                        if alias.name.startswith("_")
                    ]
    assert offenders == []


RUN_BEFORE_SPAWN = {
    *("polypilot_tui", "polypilot_tui.agents", "polypilot_tui.agents.catalog", "polypilot_tui.agents.copilot"),
    *("polypilot_tui.agents.copilot.cli_spec", "polypilot_tui.agents.copilot.spawn"),
    *("polypilot_tui.agents.head_start", "polypilot_tui.agents.leash", "polypilot_tui.agents.locate"),
    *("polypilot_tui.agents.npm_cache", "polypilot_tui.agents.raw_agent"),
    *("polypilot_tui.domain", "polypilot_tui.domain.exit_status", "polypilot_tui.domain.pass_env"),
    "polypilot_tui.domain.patterns",  # safe_json's patterns, compiled on first use (re and functools only)
    *("polypilot_tui.domain.safe_json", "polypilot_tui.domain.urls", "polypilot_tui.infra"),
    "polypilot_tui.infra.private",
    "polypilot_tui.infra.settings_sources",
}
"""What ``polypilot run`` has imported when it starts a Copilot CLI (agents/head_start.py's early
start): the settings' sources, the agent's raw table, its command line and the spawn — no
pydantic, settings models, asyncio, engine, storage, UI or SDK yet (they load while the CLI
boots). A module that joins this list delays every headless run."""
NOT_BEFORE_SPAWN = {"pydantic", "asyncio", "dataclasses", "copilot", "acp", "textual", "rich", "dotenv", "logging"}
"""Third-party and standard modules the early start stays clear of (each costs 3-100 ms)."""

SPAWN_PROBE = """
import gc, subprocess, sys
seen = []
popen = subprocess.Popen.__init__
def spawning(self, args, *rest, **kw):
    if not seen and any(str(arg).endswith("fake-copilot") for arg in args):
        seen.append(sorted(sys.modules))
        print("collecting at the spawn:", gc.isenabled())
    popen(self, args, *rest, **kw)
subprocess.Popen.__init__ = spawning
from polypilot_tui.entry import main  # the polypilot command's own
sys.argv[1:] = ["run", "--agent", "fake", "--allow-tools", "hi"]
try:
    code = main()  # returns (2) or raises SystemExit
except SystemExit as exc:
    code = exc.code
print(code)
print(",".join(seen[0] if seen else ["NOT SPAWNED"]))
print(",".join(sorted(sys.modules)))
"""


def fake_copilot_setup(tmp_path: Path, provider: str) -> dict[str, str]:
    """A Copilot agent ``fake`` whose CLI notes it was started and dies at once; the run's env."""
    cli = tmp_path / "fake-copilot"
    cli.write_text(f"#!/bin/sh\ntouch {tmp_path / 'started'}\nexit 3\n")
    cli.chmod(0o700)
    agents = tmp_path / "agents.toml"
    agents.write_text(f'[fake]\nkind = "copilot"\ncommand = "{cli}"\nmodel = "gpt-4.1"\nprovider = {provider}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    return env | {
        "POLYPILOT_STATE_DIR": str(tmp_path / "state"),
        "POLYPILOT_CONFIG_DIR": str(tmp_path / "config"),
        "POLYPILOT_AGENTS_FILE": str(agents),
    }


def test_polypilot_run_starts_the_copilot_cli_before_the_engine_and_never_loads_the_ui(tmp_path: Path) -> None:
    env = fake_copilot_setup(tmp_path, '{ base_url = "http://127.0.0.1:9/v1" }')
    done = subprocess.run(
        [sys.executable, "-c", SPAWN_PROBE], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    code, at_spawn, at_end = done.stdout.splitlines()[-3:]
    assert code == "1", done.stderr  # the CLI exited at once: not completed, said on stderr
    assert "could not start the agent" in done.stderr
    ours = {name for name in at_spawn.split(",") if name.startswith("polypilot_tui")} - {"polypilot_tui.entry"}
    assert ours == RUN_BEFORE_SPAWN, f"imported before the spawn: +{ours - RUN_BEFORE_SPAWN} -{RUN_BEFORE_SPAWN - ours}"
    assert not {name.split(".")[0] for name in at_spawn.split(",")} & NOT_BEFORE_SPAWN
    assert not {name.split(".")[0] for name in at_end.split(",")} & {"textual", "rich", "acp", "starlette", "uvicorn"}
    assert "polypilot_tui.engine.builder" in at_end.split(",")  # the probe saw the whole run
    assert "collecting at the spawn: False" in done.stdout  # no collector walking the imports (entry.py)


def test_a_run_its_checks_refuse_starts_no_agent(tmp_path: Path) -> None:
    """The head start comes after the checks: an agent that cannot start (its key variable is
    not set) is refused with exit 2 and its CLI is never started."""
    env = fake_copilot_setup(tmp_path, '{ base_url = "http://127.0.0.1:9/v1", api_key_env = "PP_TEST_UNSET_KEY" }')
    env.pop("PP_TEST_UNSET_KEY", None)
    done = subprocess.run(
        [sys.executable, "-c", SPAWN_PROBE], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    code, at_spawn, _ = done.stdout.splitlines()[-3:]
    assert code == "2" and "PP_TEST_UNSET_KEY" in done.stderr, done.stderr
    assert at_spawn == "NOT SPAWNED"


RUN_COLLECTS = """
import gc, sys
from polypilot_tui.commands import run
from polypilot_tui.engine import builder
seen = []
build_engine, exit_code = builder.build_engine, run.exit_code
def building(*args, **kw):
    seen.append(f"engine built collecting: {gc.isenabled()}")
    return build_engine(*args, **kw)
def ending(*args, **kw):
    seen.append(f"turn over collecting: {gc.isenabled()}, frozen: {gc.get_freeze_count() > 0}")
    return exit_code(*args, **kw)
builder.build_engine, run.exit_code = building, ending
from polypilot_tui.entry import main
sys.argv[1:] = ["run", "--agent", "demo", "hi"]
code = main()
print(code, *seen, sep="\\n")
"""


def test_a_headless_run_starts_without_collections_and_collects_once_its_turn_runs(tmp_path: Path) -> None:
    """``polypilot run`` imports the engine (and the SDK) with the collector off, as the
    dashboard starts (entry.py), and turns it on, the start-up's heap frozen, once its turn is
    under way: a turn of hours collects its garbage."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env |= {"POLYPILOT_STATE_DIR": str(tmp_path / "state"), "POLYPILOT_CONFIG_DIR": str(tmp_path / "config")}
    env |= {"POLYPILOT_DEMO_SPEED": "100", "POLYPILOT_RECORD": "false"}
    done = subprocess.run(
        [sys.executable, "-c", RUN_COLLECTS], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.stdout.splitlines()[-3:] == [  # after the demo's reply
        "0",
        "engine built collecting: False",
        "turn over collecting: True, frozen: True",
    ], done.stdout + done.stderr


RUN_HUNG_COLLECTS = """
import gc, os, sys, threading, time
from polypilot_tui.commands import run
run.COLLECT_AFTER_SECONDS = 0.2

def report():
    deadline = time.monotonic() + 20  # the agent's connect would time out after 90 s
    while gc.isenabled() and time.monotonic() < deadline:  # until entry.py turns them off
        time.sleep(0.01)
    while not gc.isenabled() and time.monotonic() < deadline:
        time.sleep(0.05)
    print("collecting while the agent never answers:", gc.isenabled(), flush=True)
    os._exit(0)

threading.Thread(target=report, daemon=True).start()
from polypilot_tui.entry import main
sys.argv[1:] = ["--agents-file", sys.argv.pop(1), "run", "--agent", "wedged", "hi"]
main()
"""


def test_a_run_whose_agent_never_answers_collects_after_a_start_s_length(tmp_path: Path) -> None:
    """A wedged agent holds the connect until its backend's own timeout (minutes): the run
    collects garbage again after COLLECT_AFTER_SECONDS whatever the agent does."""
    agents = tmp_path / "agents.toml"
    agents.write_text(
        f'[wedged]\nkind = "acp"\ncommand = "{sys.executable}"\nargs = ["{FAKE_AGENT}"]\n'
        f'env = {{ FAKE_ACP_HANG_INIT = "1", FAKE_ACP_STATE = "{tmp_path / "agent"}" }}\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")}
    env |= {"POLYPILOT_STATE_DIR": str(tmp_path / "state"), "POLYPILOT_CONFIG_DIR": str(tmp_path / "config")}
    env["POLYPILOT_RECORD"] = "false"
    done = subprocess.run(
        [sys.executable, "-c", RUN_HUNG_COLLECTS, str(agents)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert "collecting while the agent never answers: True" in done.stdout, done.stdout + done.stderr
