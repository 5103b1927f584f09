"""A headless run's early CLI (agents/head_start.py): started from the raw settings before
pydantic, taken only when it is exactly what the validated settings start, killed otherwise
before it was sent anything — real processes, real files."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from msgspec import structs

from polypilot_tui.agents.copilot.cli_spec import cli_environment, server_cwd, spec_of
from polypilot_tui.agents.head_start import EarlyCli, run_words, start_early
from polypilot_tui.agents.locate import find_command
from polypilot_tui.agents.raw_agent import plain_copilot
from polypilot_tui.cli import build_parser
from polypilot_tui.config import AgentConfig, Settings, checked
from polypilot_tui.infra.settings_sources import SETTING_NAMES
from tests.support.processes import alive

PROBE = """
import os, sys
from pathlib import Path
from polypilot_tui.agents import head_start
from polypilot_tui.agents.copilot import spawn

events = []
start_early, discard, spawn_cli = head_start.start_early, head_start.EarlyCli.discard, spawn.spawn_cli

def starting(argv):
    early = start_early(argv)
    events.append(f"early {early.process.pid if early else None}")
    if (after := os.environ.get("PROBE_AGENTS_AFTER")) is not None:  # the file changes under the run
        Path(os.environ["POLYPILOT_AGENTS_FILE"]).write_text(after)
    return early

def discarding(self):
    killing = not self.settled
    discard(self)
    if killing:  # reaped here, and the SDK (which would talk to it) not even imported yet
        reaped = self.process.returncode is not None
        events.append(f"killed {self.process.pid} reaped={reaped} sdk={'copilot' in sys.modules}")

def spawning(argv, *rest, **kw):
    process = spawn_cli(argv, *rest, **kw)
    sandboxed = " in bwrap" if any(a.endswith("bwrap") for a in argv) else ""
    events.append(f"spawned {process.pid}{sandboxed}" + (" --changed" if "--changed" in argv else ""))
    return process

head_start.start_early, head_start.EarlyCli.discard, spawn.spawn_cli = starting, discarding, spawning
from polypilot_tui.entry import main
sys.argv[1:] = ["run", "--agent", "fake", "--allow-tools", "hi"]
try:
    code = main()
except SystemExit as exc:
    code = exc.code
print(f"CODE {code}", *events, sep="\\n")
"""


def fake_cli(tmp_path: Path) -> Path:
    """A CLI that keeps the first byte it is sent (in ``stdin.PID``) and exits."""
    cli = tmp_path / "fake-copilot"
    cli.write_text(f"#!/bin/sh\nexec head -c 1 > {tmp_path}/stdin.$$\n")
    cli.chmod(0o700)
    return cli


def agents_text(cli: Path, extra: str = "") -> str:
    provider = 'provider = { base_url = "http://127.0.0.1:9/v1" }\n'
    return f'[fake]\nkind = "copilot"\ncommand = "{cli}"\nmodel = "gpt-4.1"\n{extra}{provider}'


def run_probe(
    tmp_path: Path, agents: str, after: str | None = None, environ: dict[str, str] | None = None
) -> tuple[str, list[str], dict[int, str]]:
    """``polypilot run --agent fake`` with ``agents`` as its agents file (``after``: its text
    once the early CLI started; ``environ``: more variables); its exit code, the probe's
    events, what each CLI was sent."""
    path = tmp_path / "agents.toml"
    path.write_text(agents)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("POLYPILOT_", "PROBE_"))}
    env |= {
        "POLYPILOT_STATE_DIR": str(tmp_path / "state"),
        "POLYPILOT_CONFIG_DIR": str(tmp_path / "config"),
        "POLYPILOT_AGENTS_FILE": str(path),
        "POLYPILOT_RECORD": "false",
    }
    if after is not None:
        env["PROBE_AGENTS_AFTER"] = after
    env |= environ or {}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    lines = done.stdout.splitlines()
    code = next((line.split()[1] for line in lines if line.startswith("CODE ")), f"none: {done.stderr[-500:]}")
    sent = {int(p.name.split(".")[1]): p.read_text(errors="replace") for p in tmp_path.glob("stdin.*")}
    return code, [line for line in lines if line.split()[:1] in (["early"], ["killed"], ["spawned"])], sent


def test_an_early_cli_the_validated_settings_agree_with_is_the_one_the_run_uses(tmp_path: Path) -> None:
    code, events, _ = run_probe(tmp_path, agents_text(fake_cli(tmp_path)))
    assert code == "1"  # the fake CLI speaks no JSON-RPC: the run could not connect to it
    early = int(events[0].split()[1])
    assert events == [f"spawned {early}", f"early {early}"], "the run started no CLI of its own: it took this one"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ('args = ["--changed"]\n', "an agents file that changed: other args"),
        ('sandbox = "workspace"\n', "a sandboxed agent: never run outside its sandbox"),
        ("network = []\n", "a network rule: a sandbox"),
    ],
)
def test_an_early_cli_the_validated_settings_disagree_with_is_killed_before_it_is_sent_anything(
    tmp_path: Path, change: str, why: str
) -> None:
    cli = fake_cli(tmp_path)
    code, events, sent = run_probe(tmp_path, agents_text(cli), after=agents_text(cli, change))
    assert code in ("1", "2"), why
    early = int(events[0].split()[1])
    assert events[:3] == [f"spawned {early}", f"early {early}", f"killed {early} reaped=True sdk=False"], why
    assert sent.get(early, "") == "", f"{why}: the early CLI was sent something"
    assert not alive(early)
    if "sandbox" not in change and "network" not in change:  # the right one was started, as the file says now
        # (the fake CLI speaks no JSON-RPC: a loaded run may start it again; each is the right one)
        later = events[3:]
        assert later and all(e.endswith(" --changed") and e.split()[1] != str(early) for e in later), why
    else:  # the sandboxed session starts its own CLI in its sandbox, never outside it
        assert all(event.endswith(" in bwrap") for event in events[3:]), why


@pytest.mark.parametrize(
    ("refusal", "code"),
    [("a setting the models refuse", "2"), ("a state folder another user owns", "7")],
)
def test_a_run_refused_after_its_early_start_kills_the_early_cli(tmp_path: Path, refusal: str, code: str) -> None:
    """The early reading does not check what the spawn does not need: the run refuses later,
    and the CLI started meanwhile is killed and reaped, sent nothing."""
    environ = {}
    if "setting" in refusal:
        environ["POLYPILOT_PERMISSION_POLICY"] = "allow-everything-please"
    else:
        (tmp_path / "state").mkdir()
        os.chown(tmp_path / "state", 65534, 65534)  # nobody's
    said, events, sent = run_probe(tmp_path, agents_text(fake_cli(tmp_path)), environ=environ)
    assert said == code, refusal
    early = int(events[0].split()[1])
    assert events == [f"spawned {early}", f"early {early}", f"killed {early} reaped=True sdk=False"], refusal
    assert sent.get(early, "") == "" and not alive(early), refusal


@pytest.fixture
def raw_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process's settings: an agents file in ``tmp_path`` and nothing else; its path."""
    for name in list(os.environ):
        if name.startswith("POLYPILOT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("POLYPILOT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("POLYPILOT_AGENTS_FILE", str(tmp_path / "agents.toml"))
    return tmp_path / "agents.toml"


@pytest.mark.parametrize(
    "extra",
    [
        "",  # the control: a plain agent starts early
        'sandbox = "workspace"\n',
        "network = []\n",
        'script = "x"\n',
        "cwd = 3\n",
        'args = "--not-a-list"\n',
        'signed_in = [{ env = "A", typo = "B" }]\n',
        'pass_env = "A"\n',
        'provider = { base_url = "http://127.0.0.1:9/v1", api_key_env = "PP_TEST_UNSET_KEY" }\n',
    ],
)
def test_nothing_unusual_starts_early(tmp_path: Path, raw_environment: Path, extra: str) -> None:
    text = agents_text(fake_cli(tmp_path), extra)
    raw_environment.write_text(text if "provider" not in extra else text.rsplit("provider", 1)[0] + extra)
    early = start_early(["run", "--agent", "fake", "hi"])
    try:
        assert (early is not None) is (extra == ""), extra
    finally:
        if early is not None:
            early.discard()
            assert early.process.returncode is not None


def test_nothing_starts_early_for_a_default_agent_of_no_process(raw_environment: Path) -> None:
    assert start_early(["run", "hi"]) is None  # the default agent is the demo


def test_settings_names_are_the_models_fields() -> None:
    assert set(Settings.__struct_fields__) == SETTING_NAMES


TABLES = [
    {"kind": "copilot", "command": "sh"},
    {"kind": "copilot", "command": "sh", "args": ["--a", "b"], "env": {"COPILOT_HOME": "/h", "GH_TOKEN": "t"}},
    {"kind": "copilot", "command": "sh", "model": "m", "provider": {"base_url": " http://127.0.0.1:9/v1 "}},
    {
        "kind": "copilot",
        "command": "sh",
        "provider": {"type": "azure", "base_url": "https://x.example/v1", "api_key_env": "HOME", "wire_api": "r"},
        "env": {"GITHUB_TOKEN": "t"},
    },
    {"kind": "copilot", "sandbox": "off", "command": "sh", "signed_in": [{"env": "HOME"}], "title": "t"},
]


@pytest.mark.parametrize("table", TABLES)
def test_the_raw_reading_computes_the_spec_the_validated_agent_does(table: dict[str, object]) -> None:
    """Where a raw table starts early, its CLI's argv and environment are the validated ones."""
    raw = plain_copilot("a", table)
    assert raw is not None
    environ = dict(os.environ) | {"GH_TOKEN": "gh-secret", "COPILOT_PROVIDER_API_KEY": "k"}
    specs = []
    for agent in (raw, checked(AgentConfig, {"name": "a", **table})):
        cli = find_command(agent, environ)
        assert cli is not None
        env, provider = cli_environment(agent, environ)
        specs.append(spec_of(agent, cli, env, logged_in=provider is None))
    assert specs[0] == specs[1]
    assert "gh-secret" not in " ".join(specs[0].argv)  # keys stay off the argv


@pytest.mark.parametrize(
    "table",
    [
        {"kind": "acp", "command": "sh"},
        {"kind": "copilot", "sandbox": "workspace"},
        {"kind": "copilot", "network": []},
        {"kind": "copilot", "name": "x"},
        {"kind": "copilot", "comand": "typo"},
        {"kind": "copilot", "provider": {"base_url": "http://x/v1", "api_key": "literal"}},
        {"kind": "copilot", "provider": {"base_url": "127.0.0.1:9/v1"}},
        {"kind": "copilot", "provider": {"base_url": "http://x/v1", "type": "other"}},
        {"kind": "copilot", "env": {"A": 1}},
        {"kind": "copilot", "model": 4},
    ],
)
def test_the_raw_reading_refuses_what_is_not_plain(table: dict[str, object]) -> None:
    assert plain_copilot("a", table) is None


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "hi"], (None, None)),
        (["run", "--agent", "c", "--json", "--allow-tools", "hi"], (None, "c")),
        (["--agents-file", "f", "run", "--agent=c", "hi"], ("f", "c")),
        (["run", "--agent=", "hi"], (None, None)),
        (["run", "-"], None),
        (["run", "--sandbox", "workspace", "hi"], None),
        (["run", "--fan-out", "c:2", "hi"], None),
        (["run", "hi", "again"], None),
        (["run", "--agent"], None),
        (["--log-file", "x", "run", "hi"], None),
        (["send", "run", "hi"], None),
        (["run", "--allow", "hi"], None),  # argparse's abbreviation: not ours to guess
    ],
)
def test_only_a_plain_run_command_line_starts_early(
    argv: list[str], words: tuple[str | None, str | None] | None
) -> None:
    assert run_words(argv) == words


def test_a_claim_with_another_spec_kills_and_reaps_and_the_same_spec_takes_it(tmp_path: Path) -> None:
    agent = AgentConfig(name="a", kind="copilot", command="sleep", args=["30"])
    cli = find_command(agent)
    assert cli is not None
    env, _ = cli_environment(agent, os.environ)
    spec = spec_of(agent, cli, env, logged_in=True)
    other = spec_of(structs.replace(agent, **{"args": ["31"]}), cli, env, logged_in=True)
    for claimed_with, taken in ((spec, True), (other, False)):
        process = subprocess.Popen(["sleep", "30"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        early = EarlyCli(spec, server_cwd(), process)
        try:
            got = early.claim(claimed_with, server_cwd())
            assert (got is process) is taken
            assert (process.returncode is None) is taken  # reaped at once when not taken
            assert early.claim(spec, server_cwd()) is None, "once"
            early.discard()
            assert process.poll() is None if taken else process.returncode is not None  # a taken one is not killed
        finally:
            process.kill()
            process.wait()
            for pipe in (process.stdin, process.stdout):
                assert pipe is not None
                pipe.close()


RUN_WORDS = st.sampled_from(
    ["run", "--agent", "--agent=", "--agent=c", "c", "", "hi", "--json", "--allow-tools", "-", "-x"]
    + ["--agents-file", "--agents-file=f", "f", "--sandbox", "workspace", "--fan-out", "c:2", "--log-file"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(RUN_WORDS, max_size=7))
@example(["--agents-file", "--agent", "run", "run"])  # found by it: argparse takes no option for a value
def test_a_command_line_read_for_an_early_start_is_read_so_by_the_command_itself(argv: list[str]) -> None:
    """Generated command lines: whenever the early reading takes one as a plain run, argparse
    reads the same run of the same agent and agents file (else the early CLI is one nobody
    asked for)."""
    words = run_words(argv)
    if words is None:
        return
    with contextlib.redirect_stderr(io.StringIO()):
        args = build_parser().parse_args(argv)
    assert args.command == "run" and args.fan_out is None and args.sandbox is None
    agents_file = None if args.agents_file is None else str(args.agents_file)
    assert (agents_file, args.agent or None) == words


TEXTS = st.lists(st.sampled_from(["-v", "", "a b", "*", "A*", "ABC*", "HOME", "x\x00y", "é"]), max_size=3)
TABLE_VALUES = {
    "command": st.sampled_from([None, "sh", "", "no-such-cli"]),
    "model": st.sampled_from([None, "gpt-5", " "]),
    "cwd": st.sampled_from(["/tmp", "", "~", "rel"]),
    "args": TEXTS,
    "pass_env": TEXTS,
    "sandbox_writable": TEXTS,
    "sandbox_read_only": TEXTS,
    "env": st.dictionaries(
        st.sampled_from(["A", "", "B C", "GH_TOKEN"]), st.sampled_from(["1", "", "x\ny"]), max_size=2
    ),
    "sandbox": st.sampled_from(["off", "workspace", "OFF"]),
    "provider": st.fixed_dictionaries(
        {"base_url": st.sampled_from(["http://127.0.0.1:9/v1", "127.0.0.1:9", " http://h/v1 "])},
        optional={"type": st.sampled_from(["openai", "azure", "anthropic", "x"]), "api_key_env": st.just("K")},
    ),
    "title": st.just("t"),
}


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({"kind": st.just("copilot")}, optional=TABLE_VALUES))
def test_a_table_read_for_an_early_start_is_an_agent_the_model_accepts_with_the_same_cli(
    table: dict[str, object],
) -> None:
    """Generated agents-file tables: one the raw reading takes, the model validates, and both
    compute the same command line and environment for the CLI."""
    raw = plain_copilot("a", table)
    if raw is None:
        return
    agent = checked(AgentConfig, {"name": "a", **table})  # raises if the model refuses it
    environ = dict(os.environ) | {"GH_TOKEN": "gh-secret", "K": "k"}
    specs = []
    for reading in (raw, agent):
        cli = find_command(reading, environ)
        if cli is None:
            specs.append(None)
            continue
        env, provider = cli_environment(reading, environ)
        specs.append(spec_of(reading, cli, env, logged_in=provider is None))
    assert specs[0] == specs[1]
