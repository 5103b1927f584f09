"""config.toml in the config folder: a settings source below the environment and .env, checked
like them (NaN, negative, absurd and unknown names refused with the field named), and
``polypilot config`` says which files are in use and where each setting came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from polypilot_tui.config import ConfigFileError, Settings

POLYPILOT = [sys.executable, "-m", "polypilot_tui"]  # as the `polypilot` script starts (entry.py)
ROOT = Path(__file__).parents[2]


def config_file() -> Path:
    return Path(os.environ["POLYPILOT_CONFIG_DIR"]) / "config.toml"


def polypilot(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("POLYPILOT_")} | env
    environ["POLYPILOT_CONFIG_DIR"] = os.environ["POLYPILOT_CONFIG_DIR"]
    environ["PYTHONPATH"] = str(ROOT)
    return subprocess.run([*POLYPILOT, *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=60)


def test_config_toml_sets_what_the_environment_does_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_file().write_text('heartbeat_seconds = 2.5\ntheme = "textual-dark"\n[watchdog]\ninactivity = 90\n')
    monkeypatch.setenv("POLYPILOT_THEME", "polypilot-day")
    settings = Settings.read(None)
    assert settings.heartbeat_seconds == 2.5 and settings.watchdog.inactivity == 90
    assert settings.theme == "polypilot-day"  # the environment wins


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("heartbeat_seconds = nan\n", "heartbeat_seconds"),
        ("stop_grace_seconds = -1\n", "stop_grace_seconds"),
        ("[watchdog]\ntool = 1e12\n", "watchdog.tool"),
        ("record_max_bytes = 99999999999999\n", "record_max_bytes"),
        ("heartbeat_secs = 3\n", "heartbeat_secs"),
        ("heartbeat_seconds = [1, \n", "not valid TOML"),
    ],
)
def test_a_bad_config_file_stops_the_start_and_names_the_field(text: str, named: str, tmp_path: Path) -> None:
    config_file().write_text(text)
    done = polypilot("config", cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert named in done.stderr and str(config_file()) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_names_are_refused_in_process_too(tmp_path: Path) -> None:
    config_file().write_text("permision_policy = 'allow'\n")  # a typo must not silently do nothing
    with pytest.raises(ConfigFileError, match="unknown setting 'permision_policy'"):
        Settings.read(None)


def test_polypilot_config_says_where_each_setting_came_from(tmp_path: Path) -> None:
    config_file().write_text('theme = "textual-dark"\n')
    (config_file().parent / ".env").write_text("POLYPILOT_DEMO_SPEED=3\n")
    secret = {"OPENAI_API_KEY": "sk-never-printed-0123456789"}
    done = polypilot("config", "--json", cwd=tmp_path, POLYPILOT_STATE_DIR=str(tmp_path / "state"), **secret)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    origins = {name: setting["from"] for name, setting in shown["settings"].items()}
    assert origins["theme"] == "config.toml" and origins["demo_speed"] == ".env"
    assert origins["state_dir"] == "environment" and origins["heartbeat_seconds"] == "default"
    assert shown["settings"]["demo_speed"]["value"] == 3.0
    assert shown["files"]["config"] == {"path": str(config_file()), "in_use": True}
    assert shown["files"]["agents"]["in_use"] is False
    text = polypilot("config", cwd=tmp_path, OPENAI_API_KEY="sk-never-printed-0123456789")
    assert "sk-never-printed" not in text.stdout + done.stdout
    assert "theme" in text.stdout and "(config.toml)" in text.stdout


def test_paths_in_config_toml_expand_the_home_folder_and_nested_typos_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config_file().write_text('state_dir = "~/pp-state"\nworktrees_dir = "~/trees"\n')
    settings = Settings.read(None)
    assert settings.state_dir == tmp_path / "pp-state" and settings.worktree_root == tmp_path / "trees"
    config_file().write_text("[watchdog]\ninactivty = 5\n")
    done = polypilot("config", cwd=tmp_path)
    assert done.returncode == 2 and "watchdog.inactivty" in done.stderr, done.stderr


def test_polypilot_config_prints_the_agents_file_and_worktrees_folder_in_effect(tmp_path: Path) -> None:
    """Unset, they are not "None": the config folder's agents.toml is read, worktrees go under
    the state folder; ``config`` says those, as ``run`` and the engine use them."""
    state = tmp_path / "state"
    none = json.loads(polypilot("config", "--json", cwd=tmp_path, POLYPILOT_STATE_DIR=str(state)).stdout)["settings"]
    assert none["agents_file"] == {"value": None, "from": "default"}  # no file: none in use
    assert none["worktrees_dir"] == {"value": str(state / "worktrees"), "from": "default"}
    agents = config_file().parent / "agents.toml"
    agents.write_text('[mine]\nkind = "acp"\ncommand = "mine"\n')
    shown = json.loads(polypilot("config", "--json", cwd=tmp_path, POLYPILOT_STATE_DIR=str(state)).stdout)
    assert shown["settings"]["agents_file"] == {"value": str(agents), "from": "default"}
    assert shown["files"]["agents"] == {"path": str(agents), "in_use": True}
    text = polypilot("config", cwd=tmp_path, POLYPILOT_STATE_DIR=str(state)).stdout
    assert f"agents_file              {agents}  (default)" in text and "None" not in text
    named = tmp_path / "other.toml"
    named.write_text("")
    chosen = json.loads(polypilot("--agents-file", str(named), "config", "--json", cwd=tmp_path).stdout)
    assert chosen["settings"]["agents_file"] == {"value": str(named), "from": "command line"}
