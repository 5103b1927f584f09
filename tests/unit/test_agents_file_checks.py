"""What a new user's agents file gets wrong is said, with the file and the line: an unknown key
(a typo) skips the entry with the key it may be a typo of, a model server address that is not
an http(s) URL is refused, a command file that cannot be run is named as such (not "not
found"), and asking for an agent that is not there says why (skipped, and where) or what it
may be a typo of. Real files, real executables on a PATH of the test's own, real commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from polypilot_tui.agents import locate as locate_module
from polypilot_tui.agents.readiness import readiness
from polypilot_tui.config import AgentCatalog, AgentConfig, ProviderConfig, Settings, load_agents
from polypilot_tui.domain.agents import Availability
from polypilot_tui.domain.failures import FailureKind, classify
from polypilot_tui.domain.names import close_names
from polypilot_tui.domain.safe_json import line_of, toml_key_lines
from polypilot_tui.domain.urls import url_problem

ROOT = Path(__file__).resolve().parents[2]

TYPOS = """\
# a new user's file
[my-agent]
kind = "acp"
comand = "my-agent"
envv = { A = "1" }

[codex]               # a catalog agent, changed
argz = ["--verbose"]

[byok]
kind = "copilot"
[byok.provider]
base_url = "http://127.0.0.1:8000/v1"
api_key_envv = "OPENAI_API_KEY"

["quoted name"]
kind = "acp"
command = \"\"\"
[not-a-table]
fil = "x"
\"\"\"
signed_in = [{ fil = "~/.token" }]

[fine]
kind = "acp"
command = "fine-agent"
"""


def polypilot(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")} | env
    environ["POLYPILOT_CONFIG_DIR"] = os.environ["POLYPILOT_CONFIG_DIR"]
    environ["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "polypilot_tui.cli", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_unknown_keys_skip_the_entry_naming_the_file_the_line_and_the_key_meant(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(TYPOS)
    catalog = load_agents(path, {"codex": {"kind": "acp", "command": "codex-acp"}})
    assert set(catalog.agents) == {"demo", "fine"}
    assert catalog.skipped == {
        "my-agent": f"{path}:4: my-agent: unknown key 'comand' (did you mean 'command'?); "
        "line 5: unknown key 'envv' (did you mean 'env'?)",
        "codex": f"{path}:8: codex: unknown key 'argz' (did you mean 'args'?)",
        "byok": f"{path}:14: byok: provider: unknown key 'api_key_envv' (did you mean 'api_key_env'?)",
        "quoted name": f"{path}:22: quoted name: signed_in.0: unknown key 'fil' (did you mean 'file'?)",
    }
    assert catalog.problems == tuple(catalog.skipped.values())


def test_a_key_with_nothing_close_lists_the_keys_there_are(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text('[x]\nkind = "acp"\nxyzzy = 1\n')
    problem = load_agents(path).skipped["x"]
    assert problem.startswith(f"{path}:3: x: unknown key 'xyzzy' (keys: kind, title, ")
    assert "'name'" not in problem and ", name," not in problem


def test_a_name_key_in_a_table_is_refused_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text('[x]\nkind = "acp"\nname = "y"\n')
    assert load_agents(path).skipped == {"x": f"{path}:3: x: a table's name is its agent's name: remove the `name` key"}


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("127.0.0.1:8000/v1", "it has no scheme"),
        ("localhost:8000/v1", "its scheme is 'localhost'"),
        ("ftp://models.example/v1", "its scheme is 'ftp'"),
        ("http:///v1", "names no host"),
        ("http://127.0.0.1:port/v1", "is not a URL"),
        ("", "it has no scheme"),
    ],
)
def test_a_provider_address_must_be_an_http_url_with_a_host(tmp_path: Path, url: str, said: str) -> None:
    assert said in (url_problem(url) or "")
    path = tmp_path / "agents.toml"
    path.write_text(f'[byok]\nkind = "copilot"\nprovider = {{ base_url = "{url}" }}\n')
    catalog = load_agents(path)
    assert "byok" not in catalog.agents
    assert (
        catalog.skipped["byok"].startswith(f"{path}:3: byok: provider.base_url: ") and said in catalog.skipped["byok"]
    )


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://models.example.com/v1", " http://[::1]:9/v1 "])
def test_real_addresses_pass(url: str) -> None:
    assert url_problem(url) is None
    assert ProviderConfig(base_url=url).base_url == url.strip()


def test_the_copilot_cli_variable_is_checked_the_same_way(tmp_path: Path) -> None:
    cli = tmp_path / "copilot"
    cli.write_text("#!/bin/sh\nexit 0\n")
    cli.chmod(0o755)
    agent = AgentConfig(name="copilot", kind="copilot", command=str(cli))
    offer = readiness(agent, {"COPILOT_PROVIDER_BASE_URL": "127.0.0.1:8000/v1", "PATH": ""})
    assert offer.availability is Availability.MISCONFIGURED and offer.cannot_start is not None
    assert (
        offer.problem
        == "COPILOT_PROVIDER_BASE_URL: '127.0.0.1:8000/v1' is not an http:// or https:// URL (it has no scheme)"
    )
    good = readiness(agent, {"COPILOT_PROVIDER_BASE_URL": "http://127.0.0.1:8000/v1", "PATH": ""})
    assert good.availability is Availability.READY


# ---- commands that cannot run ------------------------------------------------------------------
@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH of the test's own, a HOME without install folders, no pinned cache."""
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{tmp_path / 'bin2'}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NPM_CONFIG_PREFIX", raising=False)
    monkeypatch.setattr(locate_module, "USER_BIN_DIRS", ())
    monkeypatch.setattr(locate_module, "PINNED", {})
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin2").mkdir()
    return tmp_path


def program(path: Path, mode: int) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(mode)
    return path


def test_a_command_file_that_is_not_executable_is_said_to_be_so(machine: Path) -> None:
    plain = program(machine / "bin" / "my-agent", 0o644)
    offer = readiness(AgentConfig(name="my", kind="acp", command="my-agent", install="pipx install my-agent"))
    assert offer.availability is Availability.NOT_EXECUTABLE and offer.cannot_start is not None
    assert offer.problem == f"{plain} is not executable (make it so with: chmod +x {plain})"
    assert "not found" not in offer.problem and "install" not in offer.problem


def test_an_executable_further_on_path_is_used(machine: Path) -> None:
    program(machine / "bin" / "my-agent", 0o644)
    runnable = program(machine / "bin2" / "my-agent", 0o755)
    offer = readiness(AgentConfig(name="my", kind="acp", command="my-agent"))
    assert offer.availability is Availability.READY and offer.where == str(runnable)


def test_a_path_to_a_plain_file_or_a_folder_is_said_to_be_so(machine: Path) -> None:
    plain = program(machine / "agent.sh", 0o600)
    offer = readiness(AgentConfig(name="my", kind="copilot", command=str(plain)))
    assert offer.availability is Availability.NOT_EXECUTABLE and f"{plain} is not executable" in (offer.problem or "")
    folder = machine / "agent-dir"
    folder.mkdir()
    offer = readiness(AgentConfig(name="my", kind="acp", command=str(folder)))
    assert offer.availability is Availability.NOT_EXECUTABLE
    assert offer.problem == f"{folder} is a folder, not a program"
    gone = readiness(AgentConfig(name="my", kind="acp", command=str(machine / "gone")))
    assert (
        gone.availability is Availability.NOT_INSTALLED
        and gone.problem == f"its command {machine / 'gone'} is not found"
    )


async def test_starting_a_command_that_is_not_executable_names_it_as_the_failure(machine: Path) -> None:
    from polypilot_tui.domain.clock import SystemClock
    from polypilot_tui.engine.manager import SessionManager

    plain = program(machine / "bin" / "my-agent", 0o644)
    settings = Settings.read(None, state_dir=machine / "state", record=False)
    manager = SessionManager(
        settings, AgentCatalog({"my": AgentConfig(name="my", kind="acp", command="my-agent")}), SystemClock()
    )
    try:
        with pytest.raises(Exception, match="could not start the agent"):
            await manager.create_session("my")
        view = manager.view(manager.ids()[0])
        assert f"{plain} is not executable" in view.reason
        assert view.failure is not None and view.failure.kind is FailureKind.NOT_INSTALLED
        assert "make its command executable" in view.failure.fix
    finally:
        await manager.shutdown()
    failure = classify(f"could not start the agent: Copilot CLI cannot be started: {plain} is not executable")
    assert failure is not None and failure.kind is FailureKind.NOT_INSTALLED


# ---- asking for an agent that is not there -------------------------------------------------------
def test_a_missing_agent_says_why_or_what_it_may_be_a_typo_of(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(TYPOS)
    catalog = load_agents(path, {"codex": {"kind": "acp", "command": "codex-acp"}})
    typo = catalog.skipped["my-agent"]
    assert catalog.missing("my-agent") == f"agent 'my-agent' was skipped because of an error at {typo}"
    assert catalog.missing("my") == (
        f"no agent named 'my'; did you mean 'my-agent'? ('my-agent' was skipped because of an error at {typo})"
    )
    assert catalog.missing("fien") == "no agent named 'fien'; did you mean 'fine'?"
    assert catalog.missing("FINE") == "no agent named 'FINE'; did you mean 'fine'?"
    assert catalog.missing("zzz") == "no agent named 'zzz' (agents: demo, fine)"
    with pytest.raises(KeyError, match="did you mean 'fine'"):
        catalog.get("fin")


def test_run_and_new_say_why_an_agent_is_missing(tmp_path: Path) -> None:
    agents = Path(os.environ["POLYPILOT_CONFIG_DIR"]) / "agents.toml"
    agents.write_text(TYPOS)
    state = str(tmp_path / "state")
    for command in (["run", "--agent", "my", "hello"], ["new", "--agent", "my"]):
        done = polypilot(*command, cwd=tmp_path, POLYPILOT_STATE_DIR=state)
        assert done.returncode == 2, done.stderr
        assert (
            "did you mean 'my-agent'?" in done.stderr and f"{agents}:4: my-agent: unknown key 'comand'" in done.stderr
        )
        assert "Traceback" not in done.stderr
    listed = polypilot("agents", cwd=tmp_path, POLYPILOT_STATE_DIR=state)
    assert f"skipped: {agents}:14: byok: provider: unknown key 'api_key_envv'" in listed.stderr


def test_run_says_a_command_is_not_executable(tmp_path: Path) -> None:
    plain = program(tmp_path / "my-agent", 0o644)
    agents = tmp_path / "agents.toml"
    agents.write_text(f'[my]\nkind = "acp"\ncommand = "{plain}"\n')
    done = polypilot(
        "--agents-file",
        str(agents),
        "run",
        "--agent",
        "my",
        "hi",
        cwd=tmp_path,
        POLYPILOT_STATE_DIR=str(tmp_path / "s"),
    )
    assert done.returncode == 2
    assert f"agent 'my' cannot start: {plain} is not executable" in done.stderr, done.stderr


# ---- where keys are --------------------------------------------------------------------------------
def test_key_lines_follow_tables_dotted_and_quoted_keys_and_skip_multiline_strings() -> None:
    text = '[a]\nx = 1\n"b.c" = """\n[fake]\ny = 2\n"""\n\n[ "d" . e ]\nf.g = 3\n[[h]]\ni = 4\n'
    lines = toml_key_lines(text)
    assert lines == {
        ("a",): 1,
        ("a", "x"): 2,
        ("a", "b.c"): 3,
        ("d", "e"): 8,
        ("d", "e", "f", "g"): 9,
        ("h",): 10,
        ("h", "i"): 11,
    }
    assert line_of(lines, ("a", "x", "deeper")) == 2 and line_of(lines, ("zz",)) is None


def test_a_suggestion_is_a_likely_typo_not_any_name_sharing_letters() -> None:
    assert close_names("mine", ["gemini", "claude"]) == []  # a new agent not yet read, not gemini
    assert close_names("geminii", ["gemini", "claude"]) == ["gemini"]
    assert close_names("cluade", ["gemini", "claude"]) == ["claude"]
    assert close_names("op", ["opencode", "copilot"]) == ["opencode"]
