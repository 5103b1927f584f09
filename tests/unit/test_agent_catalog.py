"""The built-in catalog and detection: fake executables on a temporary PATH, a HOME of the
test's own, sign-in signs from variables and files, and the user's agents file on top."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from msgspec import structs

from polypilot_tui.agents import locate as locate_module
from polypilot_tui.agents.catalog import builtin_tables, load_catalog
from polypilot_tui.agents.locate import expand, locate, not_runnable
from polypilot_tui.agents.readiness import readiness
from polypilot_tui.config import AgentConfig, ProviderConfig, Settings, checked
from polypilot_tui.domain.agents import Availability
from tests.support.local_users import local_user, shared_folder

#: What the issue names, at least.
KNOWN = {"copilot", "copilot-acp", "opencode", "codex", "gemini", "claude", "goose", "qwen"}


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty machine: PATH with one empty folder, HOME and XDG of the test's own, no pinned cache."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    homes = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "COPILOT_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "NPM_CONFIG_PREFIX")
    for name in homes:
        monkeypatch.delenv(name, raising=False)
    for sign in {
        s.env for t in builtin_tables().values() for s in checked(AgentConfig, {"name": "x", **t}).signed_in if s.env
    }:
        monkeypatch.delenv(sign, raising=False)
    monkeypatch.setattr(locate_module, "PINNED", {})
    return tmp_path


def install(folder: Path, command: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / command
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def offers(settings: Settings) -> dict[str, tuple[Availability, str | None]]:
    found = {name: readiness(agent) for name, agent in load_catalog(settings).agents.items()}
    return {name: (offer.availability, offer.problem) for name, offer in found.items()}


def test_the_builtin_catalog_knows_the_usual_agents_and_how_to_install_and_sign_in(settings: Settings) -> None:
    catalog = load_catalog(settings)
    assert catalog.problems == ()
    assert set(catalog.agents) >= KNOWN
    for name in KNOWN:
        agent = catalog.agents[name]
        assert agent.command and agent.install and agent.sign_in and agent.signed_in and agent.title, name


def test_nothing_installed_means_not_installed_with_the_install_command(machine: Path, settings: Settings) -> None:
    found = offers(settings)
    assert found["demo"] == (Availability.READY, None)
    for name in KNOWN:
        availability, problem = found[name]
        assert availability is Availability.NOT_INSTALLED, name
        assert "install it with: " in (problem or "") and "npm install -g" in (problem or "") or name == "goose"


def test_installed_without_a_sign_in_needs_one_and_says_how(machine: Path, settings: Settings) -> None:
    install(machine / "bin", "codex-acp")
    install(machine / "bin", "gemini")
    found = offers(settings)
    assert found["codex"] == (Availability.NEEDS_SIGN_IN, "no sign-in found: run `codex login`, or set OPENAI_API_KEY")
    assert found["gemini"][0] is Availability.NEEDS_SIGN_IN and "GEMINI_API_KEY" in (found["gemini"][1] or "")
    offer = readiness(load_catalog(settings).agents["codex"])
    assert offer.cannot_start is None  # a guess: offered, with the reason, not refused
    assert offer.where == str(machine / "bin" / "codex-acp")


def test_a_variable_or_a_file_of_the_agents_own_is_a_sign_in(
    machine: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(machine / "bin", "copilot")
    install(machine / "bin", "codex-acp")
    install(machine / "bin", "claude-agent-acp")
    home = machine / "home"
    copilot_config = home / ".copilot" / "config.json"
    copilot_config.parent.mkdir(parents=True)
    copilot_config.write_text('{"banner": "never"}')  # used once, never signed in
    assert offers(settings)["copilot"][0] is Availability.NEEDS_SIGN_IN
    copilot_config.write_text('{"logged_in_users": [{"host": "https://github.com", "login": "me"}]}')
    (home / ".codex").mkdir()
    (home / ".codex" / "auth.json").write_text("{}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    found = offers(settings)
    assert found["copilot"] == found["codex"] == found["claude"] == (Availability.READY, None)
    assert found["copilot-acp"] == (Availability.READY, None)  # same command, same sign-in


def test_a_provider_of_ones_own_needs_its_key_and_no_sign_in(
    machine: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(machine / "bin", "copilot")
    table = builtin_tables()["copilot"]
    provider = ProviderConfig(base_url="http://127.0.0.1:9/v1", api_key_env="MY_MODEL_KEY")
    byok = structs.replace(checked(AgentConfig, {"name": "copilot", **table}), provider=provider)
    assert readiness(checked(AgentConfig, {"name": "copilot", **table})).availability is Availability.NEEDS_SIGN_IN
    assert readiness(byok).availability is Availability.NO_KEY
    monkeypatch.setenv("MY_MODEL_KEY", "sk-test")
    assert readiness(byok).availability is Availability.READY


def test_commands_are_found_where_installers_put_them_when_path_lacks_them(machine: Path, settings: Settings) -> None:
    npm_global = install(machine / "home" / ".npm-global" / "bin", "opencode")
    assert locate("opencode") == str(npm_global)
    nvm = install(machine / "home" / ".nvm" / "versions" / "node" / "v22.1.0" / "bin", "qwen")
    assert locate("qwen") == str(nvm)
    assert locate("not-a-command-anywhere") is None
    assert locate(str(npm_global)) == str(npm_global)
    npm_global.chmod(0o644)  # not executable: not a command
    assert locate("opencode") is None


def test_paths_expand_home_and_variables_with_defaults() -> None:
    env = {"HOME": "/h", "CODEX_HOME": "/c", "EMPTY": ""}
    assert expand("${CODEX_HOME:-~/.codex}/auth.json", env) == "/c/auth.json"
    assert expand("${COPILOT_HOME:-~/.copilot}/config.json", env) == "/h/.copilot/config.json"
    assert expand("${EMPTY:-~/x}", env) == "/h/x"  # empty is unset, as in the shell's :-
    assert expand("~", env) == "/h" and expand("~user/x", env) == "~user/x"
    assert expand("${NOPE}/a", env) == "/a"


def test_the_users_file_changes_only_what_it_sets_and_adds_agents(machine: Path, tmp_path: Path) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text("""
[codex]
args = ["--verbose"]
env = { CODEX_HOME = "/somewhere" }

[mine]
kind = "acp"
command = "my-agent"
install = "pipx install my-agent"

[broken]
kind = "nope"
""")
    settings = Settings.read(None, state_dir=tmp_path / "state", agents_file=agents)
    catalog = load_catalog(settings)
    codex = catalog.agents["codex"]
    assert (codex.command, codex.args, codex.env) == ("codex-acp", ["--verbose"], {"CODEX_HOME": "/somewhere"})
    assert codex.install == builtin_tables()["codex"]["install"]  # the rest is the catalog's
    mine = readiness(catalog.agents["mine"]).problem
    assert mine == "its command my-agent is not found; install it with: pipx install my-agent"
    assert "broken" not in catalog.agents and catalog.problems == (catalog.skipped["broken"],)
    assert catalog.skipped["broken"].startswith(f"{agents}:12: broken: kind:")


def test_the_config_folders_agents_file_is_read_without_being_named(
    machine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = Path(os.environ["POLYPILOT_CONFIG_DIR"])
    settings = Settings.read(None, state_dir=tmp_path / "state")
    assert settings.agents_path is None
    (folder / "agents.toml").write_text('[extra]\nkind = "acp"\ncommand = "extra-agent"\n')
    assert settings.agents_path == folder / "agents.toml"
    assert "extra" in load_catalog(settings).agents


def test_a_no_key_agent_is_refused_not_guessed(machine: Path, tmp_path: Path) -> None:
    install(machine / "bin", "copilot")
    agent = AgentConfig(
        name="byok",
        kind="copilot",
        provider=ProviderConfig(base_url="http://127.0.0.1:9/v1", api_key_env="POLYPILOT_TEST_UNSET_KEY"),
    )
    offer = readiness(agent, {"PATH": str(machine / "bin")})
    assert offer.availability is Availability.NO_KEY
    assert offer.cannot_start and "POLYPILOT_TEST_UNSET_KEY" in offer.cannot_start


def test_the_readmes_agents_file_example_is_valid(machine: Path, tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    example = readme.split("a new name adds an agent:\n\n```toml\n", 1)[1].split("```", 1)[0]
    agents = tmp_path / "agents.toml"
    agents.write_text(example)
    catalog = load_catalog(Settings.read(None, agents_file=agents))
    assert catalog.problems == ()
    assert catalog.agents["codex"].command == "codex-acp" and catalog.agents["codex"].env
    assert readiness(catalog.agents["my-agent"]).hint == "pipx install my-agent"


@pytest.mark.parametrize("wide", ["*", "A*", "=X", "MY VAR"])
def test_an_agent_cannot_be_handed_the_whole_environment(wide: str) -> None:
    with pytest.raises(ValueError, match="pass_env"):
        AgentConfig(name="x", kind="acp", command="x", pass_env=[wide])
    assert AgentConfig(name="x", kind="acp", command="x", pass_env=["GEMINI_*", "HTTP_PROXY"]).pass_env


def test_a_folder_on_path_the_user_cannot_look_into_is_passed_over() -> None:
    """A PATH may name a folder the user cannot search (another user's, an unmounted share):
    finding an agent skips it, and the next folder's file is still told of."""
    with local_user() as user, shared_folder() as shared:
        locked = shared / "locked"
        locked.mkdir(mode=0o700)  # root's: the user cannot look inside
        (locked / "my-agent").write_text("#!/bin/sh\n")
        (locked / "my-agent").chmod(0o755)
        mine = shared / "bin"
        mine.mkdir(mode=0o755)
        (mine / "my-agent").write_text("#!/bin/sh\n")
        (mine / "my-agent").chmod(0o644)
        env = {"PATH": f"{locked}:{mine}", "HOME": str(shared / "home")}
        agent = AgentConfig(name="mine", kind="acp", command="my-agent")

        def look() -> tuple[str | None, str | None, str]:
            state = readiness(agent, env)
            return locate("my-agent", env["PATH"], env), not_runnable("my-agent", env["PATH"], env), state.where

        found, why, detail = user.run(look)
    assert found is None
    assert why == f"{mine / 'my-agent'} is not executable (make it so with: chmod +x {mine / 'my-agent'})"
    assert "not executable" in detail, detail
