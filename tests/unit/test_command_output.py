"""Every command prints through ``output.say``: what an engine returned (with ``--host``,
another machine's) reaches the terminal without its terminal controls."""

from __future__ import annotations

import ast
import io
import os
import sys
from pathlib import Path

import pytest

import polypilot_tui.commands as commands
from polypilot_tui.commands.output import say

HOSTILE = "ok\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\tbranch\x9b1m\rend"


def test_no_command_prints_but_through_say() -> None:
    """The one writer is ``say``: a bare ``print`` or ``sys.stdout.write`` in a command module
    would put an engine's text on the terminal as it came."""
    found = []
    for path in sorted(Path(commands.__file__).parent.glob("*.py")):
        if path.name == "output.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id == "print":
                found.append(f"{path.name}:{node.lineno} print")
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "write"
                and ast.unparse(func.value)
                in (
                    "sys.stdout",
                    "sys.stderr",
                )
            ):
                found.append(f"{path.name}:{node.lineno} {ast.unparse(func)}")
    assert found == []


@pytest.mark.parametrize("err", [False, True])
def test_say_strips_terminal_controls_on_either_stream(capsys: pytest.CaptureFixture[str], err: bool) -> None:
    say("merged", HOSTILE, err=err)
    captured = capsys.readouterr()
    written, other = (captured.err, captured.out) if err else (captured.out, captured.err)
    assert written == "merged okred\tbranch\nend\n"
    assert other == ""
    assert "\x1b" not in written and "\x07" not in written and "\x9b" not in written


def test_a_diff_to_a_pipe_is_kept_byte_for_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()  # not a terminal: a patch to `git apply`
    monkeypatch.setattr(sys, "stdout", stream)
    say("+a\x1b[31m\r\n", data=True)
    assert stream.getvalue() == "+a\x1b[31m\r\n"


def test_a_diff_to_a_terminal_is_stripped(monkeypatch: pytest.MonkeyPatch) -> None:
    leader, follower = os.openpty()
    try:
        with open(follower, "w", encoding="utf-8", closefd=False) as tty:
            monkeypatch.setattr(sys, "stdout", tty)
            say("+a\x1b]52;c;Zm9v\x07b\n", data=True)
            tty.flush()
        got = os.read(leader, 1024)
    finally:
        os.close(leader)
        os.close(follower)
    assert b"\x1b" not in got and b"ab" in got
