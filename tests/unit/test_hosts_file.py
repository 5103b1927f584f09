"""``polypilot hosts add|ls|rm``: the hosts file in the config folder, private, checked."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from polypilot_tui.commands.hosts import cmd_hosts
from polypilot_tui.domain.hosts import HostEntry
from polypilot_tui.service.hosts_file import HostsFileError, add_host, find_host, read_hosts, remove_host


def test_hosts_are_added_listed_and_removed_in_a_private_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config" / "polypilot" / "hosts.json"
    assert cmd_hosts("add", "dev", "me@dev.example:2200", "polypilot", [], path=path) == 0
    assert cmd_hosts("add", "build", "[::1]:22", "~/bin/polypilot", ["-F", "/x/cfg"], path=path) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [e.name for e in read_hosts(path)] == ["dev", "build"]
    assert find_host(path, "build") == HostEntry("build", "[::1]:22", "~/bin/polypilot", ("-F", "/x/cfg"))
    capsys.readouterr()
    assert cmd_hosts("ls", None, None, "polypilot", [], json_mode=True, path=path) == 0
    assert [h["target"] for h in json.loads(capsys.readouterr().out)] == ["me@dev.example:2200", "[::1]:22"]
    assert cmd_hosts("rm", "dev", None, "polypilot", [], path=path) == 0
    assert [e.name for e in read_hosts(path)] == ["build"]


def test_an_ssh_config_alias_with_an_underscore_is_added_as_ssh_would_take_it(tmp_path: Path) -> None:
    # `--ssh my_box` worked while `hosts add build my_box` was refused: one parser now.
    path = tmp_path / "hosts.json"
    assert cmd_hosts("add", "build", "my_box", "polypilot", [], path=path) == 0
    assert find_host(path, "build") == HostEntry("build", "my_box", "polypilot", ())


@pytest.mark.parametrize(
    ("name", "target", "options", "said"),
    [
        ("dev", "-oProxyCommand=touch /tmp/pwned", [], "would read as an ssh option"),
        ("dev", "dev@-oProxyCommand=x", [], "is not a host name"),
        ("Dev Box", "dev", [], "cannot name a host"),
        ("dev", "dev", ["ProxyCommand=x"], "ssh option"),
        ("local", "dev", [], "reserved"),
    ],
)
def test_a_bad_name_target_or_option_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, target: str, options: list[str], said: str
) -> None:
    path = tmp_path / "hosts.json"
    assert cmd_hosts("add", name, target, "polypilot", options, path=path) == 2
    assert said in capsys.readouterr().err and not path.exists()


def test_a_name_taken_an_unknown_name_and_a_broken_file_are_told_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "hosts.json"
    add_host(path, HostEntry.checked("dev", "dev"))
    with pytest.raises(HostsFileError, match="already named 'dev'"):
        add_host(path, HostEntry.checked("dev", "other"))
    with pytest.raises(HostsFileError, match=r"no host 'nope' \(hosts: dev\)"):
        find_host(path, "nope")
    with pytest.raises(HostsFileError, match="no host 'nope'"):
        remove_host(path, "nope")
    path.write_text('{"hosts": [{"name": "x", "target": "-oProxyCommand=y"}]}')
    with pytest.raises(HostsFileError, match=f"{path}.*would read as an ssh option"):
        read_hosts(path)
    os.unlink(path)
    os.symlink(tmp_path / "elsewhere", path)
    with pytest.raises(HostsFileError, match="link"):
        read_hosts(path)


def test_a_command_aimed_at_an_unknown_host_says_which_hosts_there_are(tmp_path: Path) -> None:
    config = tmp_path / "config"
    add_host(config / "hosts.json", HostEntry.checked("dev", "dev"))
    env = {**os.environ, "POLYPILOT_CONFIG_DIR": str(config), "POLYPILOT_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-m", "polypilot_tui", "ls", "--host", "nope"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "no host 'nope' (hosts: dev)" in done.stderr


@pytest.mark.parametrize(("what", "mode"), [("file", 0o666), ("file", 0o620), ("folder", 0o777), ("folder", 0o770)])
def test_a_hosts_file_others_could_have_written_is_refused_not_run(tmp_path: Path, what: str, mode: int) -> None:
    # Its ssh options and remote command decide what runs: one someone else could edit is never used.
    folder = tmp_path / "config"
    path = folder / "hosts.json"
    add_host(path, HostEntry.checked("dev", "dev"))
    (path if what == "file" else folder).chmod(mode)
    try:
        with pytest.raises(HostsFileError, match=f"{'hosts.json' if what == 'file' else 'config'}.*written by"):
            read_hosts(path)
    finally:
        folder.chmod(0o700)
        path.chmod(0o600)
    assert [e.name for e in read_hosts(path)] == ["dev"]


def test_ssh_options_are_given_as_ssh_takes_them_each_after_its_own_flag(tmp_path: Path) -> None:
    # `--ssh-option -F --ssh-option FILE`, as the help's "-F FILE" reads: argparse alone refused it.
    env = {**os.environ, "POLYPILOT_CONFIG_DIR": str(tmp_path / "config")}
    add = [sys.executable, "-m", "polypilot_tui", "hosts", "add", "dev", "me@dev.example:2200"]
    options = ["--ssh-option", "-F", "--ssh-option", "/x/cfg", "--ssh-option=-oServerAliveInterval=5"]
    done = subprocess.run([*add, *options], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    entry = find_host(tmp_path / "config" / "hosts.json", "dev")
    assert entry.ssh_options == ("-F", "/x/cfg", "-oServerAliveInterval=5")


@pytest.mark.parametrize("argv", [["engine", "stop"], ["status"], ["--in-process"]])
def test_host_aimed_at_a_command_with_no_host_form_runs_nothing_here(
    tmp_path: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`polypilot --host ci engine stop` must not stop this machine's engine."""
    from polypilot_tui.cli import main

    config = tmp_path / "config"
    add_host(config / "hosts.json", HostEntry.checked("ci", "ci"))
    monkeypatch.setenv("POLYPILOT_CONFIG_DIR", str(config))
    monkeypatch.setenv("POLYPILOT_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(SystemExit) as exited:
        main(["--host", "ci", *argv])
    assert exited.value.code == 2
    assert not (tmp_path / "state").exists()  # nothing was started or made here


def test_no_hosts_file_reads_as_no_hosts_whatever_the_config_folder(tmp_path: Path) -> None:
    """A user with umask 002 (a group-writable config folder) and no fleet still starts."""
    config = tmp_path / "config"
    config.mkdir(mode=0o775)
    config.chmod(0o775)
    assert read_hosts(config / "hosts.json") == []
