"""Issue #11.1: one writer per state folder.

Two dashboards on one folder used to share it without a word: both adopted the same saved
session, their rows overwrote each other, a session made in one vanished at the other's
next save, and the one that quit wrote ``pid: null`` so ``status`` said nothing ran.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.reliability.conftest import App, Dashboard, clean_env, db_texts, polypilot
from tests.support.waiting import until


def test_a_second_dashboard_names_the_holder_and_exits_before_drawing_and_status_tells_the_truth(
    tmp_path: Path, dashboards: Callable[[dict[str, str]], Dashboard]
) -> None:
    state = tmp_path / "state"
    env = clean_env(state)
    first = dashboards(env)
    first.wait_for_lock(state)

    second = polypilot(env, "--in-process", timeout=60)  # no terminal needed: it must stop before the UI starts
    assert second.returncode == 3, (second.returncode, second.stderr[-2000:])
    assert f"pid {first.proc.pid}" in second.stderr and str(state) in second.stderr
    assert "POLYPILOT_STATE_DIR" in second.stderr  # and what to do about it
    assert second.stdout == "" and "\x1b" not in second.stderr and "Traceback" not in second.stderr

    running = json.loads(polypilot(env, "status", "--json").stdout)
    assert running["app_running"] is True and running["app_pid"] == first.proc.pid

    first.kill(signal.SIGKILL)  # however it ends, the kernel lets go of the lock
    stopped = json.loads(polypilot(env, "status", "--json").stdout)
    assert stopped["app_running"] is False and stopped["app_pid"] is None
    again = dashboards(env)  # and the folder is free for the next one at once
    again.wait_for_lock(state)


@pytest.mark.expect_errors(
    "Another polypilot took over the state folder", "chat rows were not saved: another polypilot took over"
)
async def test_two_writers_on_one_folder_never_overwrite_each_other(tmp_path: Path) -> None:
    """The lock keeps a second app out; if it is broken anyway (here: two writers in one
    process share it), the newer writer owns the stores and the older one stops saving,
    says so, and overwrites nothing."""
    state = tmp_path / "state"
    old = App(state)
    sid = await old.manager.create_session("demo", "shared")
    await old.turn(sid, "first question")
    await until(
        lambda: (
            db_texts(state, sid) == old.texts(sid)
            and (state / "sessions.json").exists()
            and sid in (state / "sessions.json").read_text()
        )
    )  # all of it on disk before the second app

    new = App(state)  # adopts the saved session and claims the folder
    assert new.manager.history(sid) == old.manager.history(sid)
    await old.turn(sid, "second question, from the old app")
    await new.turn(sid, "third question, from the new app")
    made_in_new = await new.manager.create_session("demo", "made in the new app")
    await old.manager.create_session("demo", "made in the old app")
    await old.turn(sid, "fourth question, from the old app")
    await asyncio.sleep(0.5)  # every write there was to be has been tried
    assert old.notices("Another polypilot took over the state folder", str(state)), old.told
    await old.close()
    await new.close()

    saved = [item.text for item in new.manager.history(sid)]
    assert db_texts(state, sid) == saved  # exactly the new app's rows: nothing of the old one mixed in
    assert not any("from the old app" in text for text in db_texts(state, sid))
    registry = json.loads((state / "sessions.json").read_text())
    assert {s["name"] for s in registry["sessions"]} == {"shared", "made in the new app"}
    assert made_in_new in {s["id"] for s in registry["sessions"]}
