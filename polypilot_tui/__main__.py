"""``python -m polypilot_tui``: the same as the ``polypilot`` command."""

from polypilot_tui.entry import command

raise SystemExit(command())
