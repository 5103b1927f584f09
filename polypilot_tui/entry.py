"""The ``polypilot`` command's entry point: no garbage collection while it starts.

Start-up makes hundreds of thousands of objects (the imports, Textual's CSS, the dashboard)
and almost none of them are garbage, yet Python's collector walks them every 700
allocations: ~10-20% of the dashboard's time to its first frame. Collections are off from
here; every command but the dashboard and a headless run turns them back on as soon as it
knows what it runs (cli.py), the dashboard when its first frame is drawn, where it freezes
what start-up made (ui/app.py), a headless run once its turn is under way (infra/collector.py:
its imports, ~200 collections and 0.1-0.3 s of CPU, overlap its agent's boot) — or when
either ends before that.
"""

from __future__ import annotations

import gc


def main() -> int:
    gc.disable()
    from polypilot_tui.cli import main as run_command

    try:
        return run_command()
    finally:
        gc.enable()
