"""``python -m polypilot_tui``: the same as the ``polypilot`` command."""

from polypilot_tui.cli import main

raise SystemExit(main())
