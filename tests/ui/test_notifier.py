"""The notifier: which channel each setting picks, and a real notify-send run without a shell."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from polypilot_tui.config import InvalidSettings, Settings
from polypilot_tui.infra.notify_command import system_command
from polypilot_tui.ui.notifier import DesktopNotifier, desktop_notifier
from tests.support.fake_notifier import fake_notifier, runs


def env_with(path: Path, **extra: str) -> dict[str, str]:
    return {"PATH": str(path), "TERM": "xterm-256color", **extra}


async def test_notify_send_gets_clean_text_after_a_double_dash(tmp_path: Path) -> None:
    exe = fake_notifier(tmp_path / "bin")
    notifier = desktop_notifier("system", lambda _: None, env_with(tmp_path / "bin"), platform="linux")
    assert notifier is not None and notifier.write is None
    await notifier.notify("-u critical\x1b]9;x\x07 needs permission", "Run: rm -rf build\n" + "z" * 10_000)
    [argv] = runs(exe)
    assert argv[:2] == ["--app-name=polypilot", "--"]  # a title starting with '-' is never an option
    assert argv[2] == "-u critical needs permission"
    assert argv[3].startswith("Run: rm -rf build zzz") and len(argv[3]) <= 240


async def test_a_failing_or_hanging_notifier_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failing = fake_notifier(tmp_path / "a", "#!/bin/sh\necho 'no \x1b[31mbus' >&2\nexit 3\n")
    hanging = fake_notifier(tmp_path / "b", "#!/bin/sh\nexec sleep 60\n")
    killed = fake_notifier(tmp_path / "c", "#!/bin/sh\necho 'out of memory' >&2\nkill -KILL $$\n")
    caplog.set_level(logging.WARNING, "polypilot_tui.ui.notifier")
    for exe in (failing, hanging, killed):
        command = system_command(str(exe.parent), "linux")
        assert command is not None
        await DesktopNotifier(None, command, {}, timeout=0.5).notify("t", "b")
    messages = [r.getMessage() for r in caplog.records]
    assert any("ended (exit code 3): no bus" in m for m in messages), messages  # stderr kept, its escape not
    assert any("ended (killed by SIGKILL (9)): out of memory" in m for m in messages), messages
    assert any("took over" in m and "killed" in m for m in messages), messages


def test_auto_uses_the_system_notifier_here_and_the_terminal_over_ssh(tmp_path: Path) -> None:
    fake_notifier(tmp_path / "bin")
    local = desktop_notifier("auto", print, env_with(tmp_path / "bin"), platform="linux")
    assert local is not None and local.command is not None and local.write is None
    remote = desktop_notifier("auto", print, env_with(tmp_path / "bin", SSH_CONNECTION="1 2 3 4"), platform="linux")
    assert remote is not None and remote.command is None and remote.write is print
    bare = desktop_notifier("auto", print, env_with(tmp_path / "empty"), platform="linux")
    assert bare is not None and bare.command is None and bare.write is print
    assert desktop_notifier("system", print, env_with(tmp_path / "empty"), platform="linux") is None
    assert desktop_notifier("off", print, env_with(tmp_path / "bin"), platform="linux") is None
    terminal = desktop_notifier("terminal", print, env_with(tmp_path / "bin"), platform="linux")
    assert terminal is not None and terminal.command is None


async def test_terminal_channel_writes_one_escape(tmp_path: Path) -> None:
    written: list[str] = []
    notifier = desktop_notifier("terminal", written.append, {"TERM": "foot"}, platform="linux")
    assert notifier is not None
    await notifier.notify("worker finished", "Its turn is over.")
    assert written == ["\x1b]777;notify;worker finished;Its turn is over.\x07"]


async def test_macos_passes_the_text_as_arguments_not_script(tmp_path: Path) -> None:
    exe = fake_notifier(tmp_path / "bin", name="osascript")
    command = system_command(str(exe.parent), "darwin")
    assert command is not None
    argv = command('"; do shell script "x', "b")
    assert argv[-3:] == ["polypilot", '"; do shell script "x', "b"]
    assert all("shell" not in part for part in argv[:-3])  # the script itself holds no untrusted text
    await DesktopNotifier(None, command, {}).notify("t", "b")
    [recorded] = runs(exe)
    assert recorded[-3:] == ["polypilot", "t", "b"]


def test_the_setting_is_one_of_four(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYPILOT_NOTIFICATIONS", "off")
    assert Settings.read(None).notifications == "off"
    assert Settings.read(None, notifications="auto").notifications == "auto"
    with pytest.raises(InvalidSettings, match="notifications"):
        Settings.read(None, notifications="loud")
