"""Notification escapes: untrusted text cannot break out of the escape, and stays bounded."""

from __future__ import annotations

import re

from polypilot_tui.infra.notify_escapes import (
    BODY_CHARS,
    TITLE_CHARS,
    for_tmux,
    notification_text,
    osc9,
    osc777,
    terminal_escape,
)

HOSTILE = "evil\x1b]0;pwned\x07name\x07\x1b[31mred\x1b\\ end\nnext line\r\tand\x9b2J C1\x00nul"


def payload(sequence: str, prefix: str) -> str:
    """The text between an escape's opening and its one BEL, asserting there is exactly one frame."""
    assert sequence.startswith(prefix) and sequence.endswith("\x07")
    inner = sequence[len(prefix) : -1]
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", inner), repr(inner)  # no ESC, BEL, newline, C1
    return inner


def test_text_loses_escapes_controls_and_newlines() -> None:
    clean = notification_text(HOSTILE, 500)
    assert clean == "evilnamered end next line and C1nul"


def test_osc9_frames_one_clean_line() -> None:
    inner = payload(osc9("worker\x07 needs permission", HOSTILE), "\x1b]9;")
    assert inner.startswith("worker needs permission: evil")
    assert "pwned" not in inner  # the embedded title-setting escape was dropped whole


def test_osc777_has_exactly_title_and_body_fields() -> None:
    inner = payload(osc777("a;b\x1b]9;x\x07 finished", "Its turn; is over.\nok"), "\x1b]777;notify;")
    title, body = inner.split(";", 1)
    assert title == "a,b finished"  # a ';' in the title would have moved text into the body
    assert body == "Its turn; is over. ok"


def test_ten_kilobyte_name_is_bounded() -> None:
    name = ("x" * 5000) + "\x1b" + ("y\n" * 2500)
    for sequence, prefix in ((osc9(name, name), "\x1b]9;"), (osc777(name, name), "\x1b]777;notify;")):
        inner = payload(sequence, prefix)
        assert len(inner) <= TITLE_CHARS + BODY_CHARS + 2
    assert len(notification_text(name, TITLE_CHARS)) == TITLE_CHARS


def test_osc9_text_never_reads_as_a_conemu_command() -> None:
    # "9;4;3" is a progress bar in ConEmu, Windows Terminal and Ghostty, not a message
    assert payload(osc9("4;3", "done"), "\x1b]9;") == " 4;3: done"


def test_tmux_passthrough_doubles_every_escape() -> None:
    wrapped = for_tmux("\x1b]9;hi\x07")
    assert wrapped == "\x1bPtmux;\x1b\x1b]9;hi\x07\x1b\\"


def test_the_escape_follows_the_terminal() -> None:
    assert terminal_escape("t", "b", {"TERM": "xterm-256color"}) == "\x1b]9;t: b\x07"
    assert terminal_escape("t", "b", {"TERM": "foot"}) == "\x1b]777;notify;t;b\x07"
    assert terminal_escape("t", "b", {"TERM": "rxvt-unicode-256color"}).startswith("\x1b]777;")
    assert terminal_escape("t", "b", {"TERM": "xterm-256color", "VTE_VERSION": "7600"}).startswith("\x1b]777;")
    vscode = {"TERM": "xterm-256color", "VTE_VERSION": "7600", "TERM_PROGRAM": "vscode"}
    assert terminal_escape("t", "b", vscode).startswith("\x1b]9;")  # inherited VTE_VERSION, another terminal
    tmux = {"TERM": "tmux-256color", "TMUX": "/tmp/tmux-0/default,1,0", "TERM_PROGRAM": "tmux"}
    assert terminal_escape("t", "b", tmux) == "\x1bPtmux;\x1b\x1b]9;t: b\x07\x1b\\"
