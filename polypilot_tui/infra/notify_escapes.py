"""Desktop notifications written as terminal escapes, from untrusted text.

A notification's title and body come from session names and agent text: a name holding
ESC or BEL could end the escape early and make the terminal act on the rest. Every field
is flattened to one line of printable text (:func:`notification_text`) before it is framed.

Two escapes exist and several terminals (WezTerm, Ghostty) honour both, so writing both
would pop two notifications: :func:`terminal_escape` picks one by what the environment says
the terminal is — OSC 777 for foot, rxvt-unicode and VTE terminals, OSC 9 for the rest
(iTerm2, WezTerm, Ghostty, kitty, Windows Terminal). Inside tmux the escape is wrapped in
tmux's passthrough, which reaches the outer terminal when ``allow-passthrough`` is on
(tmux drops it quietly otherwise).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from polypilot_tui.domain.text import one_line

TITLE_CHARS = 100
"""Longest title a notification shows (a 10 kB session name is cut, not sent)."""
BODY_CHARS = 240
"""Longest body a notification shows."""

ESC = "\x1b"
BEL = "\x07"
_CONEMU_COMMAND = re.compile(r"\d+;")
"""OSC 9 text that starts like this is a ConEmu command (``9;4;…`` is a progress bar), not a message."""


def notification_text(text: str, limit: int) -> str:
    """One line of ``text`` without escape sequences or control characters, at most ``limit`` long."""
    return one_line(text, limit)


def osc9(title: str, body: str) -> str:
    """``ESC ] 9 ; title: body BEL``: one line of text, the form iTerm2 started."""
    text = notification_text(f"{notification_text(title, TITLE_CHARS)}: {notification_text(body, BODY_CHARS)}", 400)
    if _CONEMU_COMMAND.match(text):
        text = " " + text
    return f"{ESC}]9;{text}{BEL}"


def osc777(title: str, body: str) -> str:
    """``ESC ] 777 ; notify ; title ; body BEL`` (rxvt-unicode's form): the title cannot hold a ';'."""
    head = notification_text(title, TITLE_CHARS).replace(";", ",")
    return f"{ESC}]777;notify;{head};{notification_text(body, BODY_CHARS)}{BEL}"


def for_tmux(sequence: str) -> str:
    """``sequence`` wrapped in tmux's passthrough (every ESC in it doubled)."""
    return f"{ESC}Ptmux;{sequence.replace(ESC, ESC + ESC)}{ESC}\\"


def wants_osc777(env: Mapping[str, str]) -> bool:
    """The terminal is one that shows OSC 777 notifications (and not OSC 9)."""
    term = env.get("TERM", "")
    # A VTE terminal (GNOME Terminal, Tilix) sets VTE_VERSION; one started from it (VS Code)
    # inherits it but names itself in TERM_PROGRAM. tmux passes the outer terminal's through.
    outer_vte = "VTE_VERSION" in env and env.get("TERM_PROGRAM", "tmux") == "tmux"
    return term.startswith(("foot", "rxvt")) or outer_vte


def terminal_escape(title: str, body: str, env: Mapping[str, str]) -> str:
    """The one escape that asks this terminal (per ``env``) for a desktop notification."""
    sequence = osc777(title, body) if wants_osc777(env) else osc9(title, body)
    return for_tmux(sequence) if env.get("TMUX") else sequence
