"""The ``polypilot`` command's entry point: no garbage collection while it starts.

Start-up makes hundreds of thousands of objects (the imports, Textual's CSS, the dashboard)
and almost none of them are garbage, yet Python's collector walks them every 700
allocations: ~10-20% of the dashboard's time to its first frame. Collections are off from
here; every command turns them back on as soon as it knows what it runs (cli.py), but three
that turn them on once started, each freezing what its start made (infra/collector.py): the
dashboard when its first frame is drawn (ui/app.py), the engine (``serve``) once it listens
(commands/engine.py), a headless run once its turn is under way (commands/run.py: its
imports, ~200 collections and 0.1-0.3 s of CPU, overlap its agent's boot) — or when one ends
before that. The price: the cycles start-up left as garbage are frozen too and kept for good
(~10,000 objects, ~1.2 MiB, in a dashboard measured; a collection before the freeze would pay
them back with a pause where the user starts typing, or the engine first answers).
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
