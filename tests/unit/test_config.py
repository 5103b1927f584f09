"""Settings (POLYPILOT_* environment, ``.env``) and the agents file (TOML)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from polypilot_tui.config import (
    DEMO_AGENT,
    AgentCatalog,
    AgentConfig,
    InvalidSettings,
    PermissionPolicy,
    ProviderConfig,
    Settings,
    SettingsError,
    WatchdogSettings,
    config_dir,
    load_agents,
)
from polypilot_tui.domain.watchdog import WatchdogConfig


def fresh(**kwargs: object) -> Settings:
    """Settings from the environment only (never a developer's .env)."""
    return Settings.read(None, **kwargs)  # type: ignore[arg-type]


# ---- defaults and the environment -----------------------------------------------------------
def test_defaults_are_polypilots_tiers_and_safe_choices() -> None:
    settings = fresh()
    assert settings.watchdog.to_config() == WatchdogConfig()  # the same numbers in both places
    assert settings.permission_policy is PermissionPolicy.ASK
    assert settings.default_agent == DEMO_AGENT and settings.agents_file is None
    assert settings.record and settings.recovery_max_attempts == 2 and settings.stop_grace_seconds == 5.0


def test_every_watchdog_setting_reaches_the_watchdog() -> None:
    config_fields = {f.name for f in dataclasses.fields(WatchdogConfig)}
    assert set(WatchdogSettings.__struct_fields__) <= config_fields
    values = {name: float(i + 1) for i, name in enumerate(WatchdogSettings.__struct_fields__)}
    assert dataclasses.asdict(WatchdogSettings(**values).to_config()).items() >= values.items()


def test_settings_come_from_polypilot_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in {
        "POLYPILOT_WATCHDOG__INACTIVITY": "45",
        "POLYPILOT_WATCHDOG__TOOL": "900.5",
        "POLYPILOT_PERMISSION_POLICY": "deny",
        "POLYPILOT_STATE_DIR": str(tmp_path / "state"),
        "POLYPILOT_AGENTS_FILE": str(tmp_path / "agents.toml"),
        "POLYPILOT_RECORD": "false",
        "POLYPILOT_DEMO_SPEED": "3",
        "POLYPILOT_STOP_GRACE_SECONDS": "1.5",
        "POLYPILOT_DEFAULT_AGENT": "codex",
        "POLYPILOT_SOMETHING_UNKNOWN": "ignored",
        "POLYPILOT_WATCHDOG__DEAD_SEND": "",  # empty = unset
    }.items():
        monkeypatch.setenv(name, value)
    settings = fresh()
    assert settings.watchdog.inactivity == 45 and settings.watchdog.tool == 900.5
    assert settings.watchdog.to_config().inactivity == 45
    assert settings.watchdog.dead_send == WatchdogSettings().dead_send
    assert settings.permission_policy is PermissionPolicy.DENY
    assert settings.state_dir == tmp_path / "state" and settings.agents_file == tmp_path / "agents.toml"
    assert (settings.record, settings.demo_speed, settings.stop_grace_seconds) == (False, 3.0, 1.5)
    assert settings.default_agent == "codex"


def test_a_whole_watchdog_table_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYPILOT_WATCHDOG", '{"inactivity": 10, "tool": 20}')
    watchdog = fresh().watchdog
    assert (watchdog.inactivity, watchdog.tool, watchdog.reconnect) == (10, 20, WatchdogSettings().reconnect)


def test_explicit_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYPILOT_PERMISSION_POLICY", "allow")
    assert fresh(permission_policy="ask").permission_policy is PermissionPolicy.ASK


# ---- .env ---------------------------------------------------------------------------------
def test_dotenv_is_read_from_the_config_folder_not_the_working_directory_and_env_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("POLYPILOT_PERMISSION_POLICY=allow\nPOLYPILOT_DEMO_SPEED=9\n")  # a repository's
    monkeypatch.chdir(tmp_path)
    (config_dir() / ".env").write_text(
        "POLYPILOT_PERMISSION_POLICY=deny\nPOLYPILOT_WATCHDOG__INACTIVITY=77\nOTHER_TOOL_SETTING=whatever\n"
    )
    settings = Settings.read()
    assert settings.permission_policy is PermissionPolicy.DENY and settings.watchdog.inactivity == 77
    assert settings.demo_speed == 1
    monkeypatch.setenv("POLYPILOT_WATCHDOG__INACTIVITY", "12")
    assert Settings.read().watchdog.inactivity == 12  # the environment beats .env


def test_env_file_none_isolates_from_a_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("POLYPILOT_PERMISSION_POLICY=allow\nPOLYPILOT_WATCHDOG__INACTIVITY=77\n")
    monkeypatch.chdir(tmp_path)
    settings = fresh()
    assert settings.permission_policy is PermissionPolicy.ASK and settings.watchdog.inactivity == 120


def test_a_dotenv_elsewhere_is_used_only_when_named(tmp_path: Path) -> None:
    env = tmp_path / "custom.env"
    env.write_text("POLYPILOT_DEMO_SPEED=4\n")
    assert Settings.read(env).demo_speed == 4
    assert Settings.read(tmp_path / "missing.env").demo_speed == 1


def test_variable_names_are_any_case_and_tables_merge_key_by_key_across_sources(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (config_dir() / "config.toml").write_text("demo_speed = 2\n[watchdog]\ntool = 300\nreconnect = 40\n")
    (config_dir() / ".env").write_text("polypilot_watchdog__reconnect=50\nPOLYPILOT_WATCHDOG__INACTIVITY=60\n")
    monkeypatch.setenv("Polypilot_Watchdog", '{"inactivity": 70}')
    monkeypatch.setenv("POLYPILOT_WATCHDOG__MAX_TURN", "80")
    monkeypatch.setenv("polypilot_default_agent", "mine")
    settings = Settings.read()
    watchdog = settings.watchdog
    # config.toml < .env < the environment (its keys over its JSON), each key on its own
    assert (watchdog.tool, watchdog.reconnect, watchdog.inactivity, watchdog.max_turn) == (300, 50, 70, 80)
    assert (settings.demo_speed, settings.default_agent) == (2, "mine")
    assert fresh(watchdog={"tool": 5}).watchdog.inactivity == 70  # an argument's table merges too


def test_a_table_setting_that_is_not_json_in_dotenv_names_the_field(tmp_path: Path) -> None:
    env = tmp_path / "custom.env"
    env.write_text("POLYPILOT_WATCHDOG={oops\n")
    with pytest.raises(SettingsError, match=r"POLYPILOT_WATCHDOG\) in .*custom\.env is not JSON"):
        Settings.read(env)


def test_a_misspelt_nested_key_and_an_unknown_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYPILOT_WATCHDOG__INACTIVTY", "5")
    with pytest.raises(InvalidSettings, match="watchdog.inactivty"):
        fresh()
    monkeypatch.delenv("POLYPILOT_WATCHDOG__INACTIVTY")
    monkeypatch.setenv("POLYPILOT_STATE_DIR__X", "/nowhere")  # not a table: not a setting at all
    assert fresh().state_dir != Path("/nowhere")
    with pytest.raises(TypeError, match="no setting named 'no_such_setting'"):  # an argument is code's: a typo
        fresh(no_such_setting=1)


# ---- validation -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "value", "where"),
    [
        ("POLYPILOT_WATCHDOG__INACTIVITY", "-1", "watchdog.inactivity"),
        ("POLYPILOT_WATCHDOG__TOOL", "ten minutes", "watchdog.tool"),
        ("POLYPILOT_PERMISSION_POLICY", "sometimes", "permission_policy"),
        ("POLYPILOT_HEARTBEAT_SECONDS", "0", "heartbeat_seconds"),
        ("POLYPILOT_RECORD", "maybe", "record"),
        ("POLYPILOT_WATCHDOG", "{not json", "watchdog"),
    ],
)
def test_invalid_settings_name_the_field(monkeypatch: pytest.MonkeyPatch, name: str, value: str, where: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises((InvalidSettings, SettingsError)) as info:  # SettingsError: not even JSON
        fresh()
    assert where in str(info.value)


@pytest.mark.parametrize(
    ("name", "value", "field", "expected"),
    [
        ("POLYPILOT_RECORD", "off", "record", False),
        ("POLYPILOT_RECORD", "No", "record", False),
        ("POLYPILOT_RECORD", "yes", "record", True),
        ("POLYPILOT_RECORD", "on", "record", True),
        ("POLYPILOT_HEARTBEAT_SECONDS", " 7 ", "heartbeat_seconds", 7.0),
        ("POLYPILOT_RECORD_MAX_BYTES", "1000 ", "record_max_bytes", 1000),
    ],
)
def test_settings_as_text_read_as_they_did_under_pydantic(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, field: str, expected: object
) -> None:
    # POLYPILOT_RECORD=off worked for every release before msgspec: refusing it now stops the start.
    monkeypatch.setenv(name, value)
    assert getattr(fresh(), field) == expected


def test_the_policy_error_lists_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYPILOT_PERMISSION_POLICY", "yolo")
    with pytest.raises(InvalidSettings, match="'ask', 'allow', 'deny' or 'allow-in-sandbox'"):
        fresh()


# ---- the agents file --------------------------------------------------------------------------
FULL = """
[opencode]
kind = "acp"
command = "opencode"
args = ["acp"]
env = { OPENCODE_DISABLE_AUTOUPDATE = "1" }
cwd = "/srv/project"
model = "mock/mock-model"

[copilot-byok]
kind = "copilot"
model = "gpt-4.1"
provider = { type = "openai", base_url = "http://127.0.0.1:8080/v1", api_key_env = "MY_MODEL_KEY", \
wire_api = "responses" }

[slow-demo]
kind = "demo"
script = "slow"
"""


def test_agents_file_parses_every_field(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(FULL)
    catalog = load_agents(path)
    assert catalog.names() == ["demo", "opencode", "copilot-byok", "slow-demo"] and catalog.problems == ()
    opencode = catalog.get("opencode")
    assert (opencode.kind, opencode.command, opencode.args, opencode.cwd, opencode.model) == (
        "acp",
        "opencode",
        ["acp"],
        Path("/srv/project"),
        "mock/mock-model",
    )
    assert opencode.env == {"OPENCODE_DISABLE_AUTOUPDATE": "1"} and opencode.provider is None
    provider = catalog.get("copilot-byok").provider
    assert provider == ProviderConfig(
        type="openai", base_url="http://127.0.0.1:8080/v1", api_key_env="MY_MODEL_KEY", wire_api="responses"
    )
    assert provider.api_key({"MY_MODEL_KEY": "k-123"}) == "k-123"
    assert catalog.get("slow-demo").script == "slow"


def test_agents_file_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(FULL)
    monkeypatch.setenv("POLYPILOT_AGENTS_FILE", str(path))
    assert "opencode" in load_agents(fresh().agents_file).names()


@pytest.mark.parametrize("content", [None, "", "# only comments\n", '[codex]\nkind = "acp"\n'])
def test_the_demo_agent_is_always_there(tmp_path: Path, content: str | None) -> None:
    path = None
    if content is not None:
        path = tmp_path / "agents.toml"
        path.write_text(content)
    catalog = load_agents(path)
    demo = catalog.get(DEMO_AGENT)
    assert catalog.names()[0] == DEMO_AGENT and demo.kind == "demo" and demo.command is None


def test_the_demo_agent_survives_bad_entries(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text('[broken]\nkind = "nope"\n')
    catalog = load_agents(path)
    assert catalog.names() == [DEMO_AGENT] and catalog.problems
    assert catalog.problems[0].startswith(f"{path}:2: broken: kind:")


def test_a_refused_choice_in_the_agents_file_never_repeats_a_key(tmp_path: Path) -> None:
    # msgspec's message repeats the refused value (pydantic's did not); the problems are shown
    # in the dashboard and by `polypilot agents`, so a key pasted into the wrong line goes.
    key = "sk-proj-ABCDEF1234567890abcdef"
    path = tmp_path / "agents.toml"
    provider = f'{{ base_url = "https://h", type = "{key}" }}'
    path.write_text(f'[a]\nkind = "{key}"\n[b]\nkind = "acp"\nprovider = {provider}\n')
    problems = load_agents(path).problems
    assert len(problems) == 2 and all(key not in problem for problem in problems), problems
    assert "a: kind:" in problems[0] and "is not one of 'demo', 'copilot' or 'acp'" in problems[0]
    assert "b: provider.type:" in problems[1]


def test_a_missing_agents_file_is_an_error(tmp_path: Path) -> None:
    from polypilot_tui.config import AgentsFileError

    with pytest.raises(AgentsFileError, match="does not exist"):
        load_agents(tmp_path / "nope.toml")


def test_an_unknown_agent_names_the_configured_ones() -> None:
    catalog = AgentCatalog(
        {"demo": AgentConfig(name="demo", kind="demo"), "codex": AgentConfig(name="codex", kind="acp")}
    )
    with pytest.raises(KeyError, match=r"no agent named 'gemini' \(agents: demo, codex\)"):
        catalog.get("gemini")


def test_a_misspelt_argument_is_refused_not_ignored() -> None:
    """An argument that names no setting (``_env_file=`` for the ``.env`` to read) would be
    dropped silently and the default ``.env`` read instead: it is a TypeError."""
    with pytest.raises(TypeError, match="no setting named '_env_file'"):
        Settings.read(None, _env_file=None)
    assert Settings.read(None, demo_speed=3).demo_speed == 3
