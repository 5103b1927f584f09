"""``polypilot fan-out``, ``compare`` and ``pick`` against a real engine (``polypilot serve``): a fan-out on
demo agents in a real repository, compared (the check run on asking), one attempt picked, the
other kept for its work at risk until ``--force``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polypilot_tui.engine import verbs
from tests.service.test_commands import finish, start
from tests.support.engine_service import running_engine, short_state_dir
from tests.support.waiting import until_answer
from tests.workspace.repos import IDENTITY, make_repo, run

pytestmark = pytest.mark.slow


async def test_compare_then_pick_one_and_discard_the_other(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    env = {**IDENTITY, "POLYPILOT_DEMO_SPEED": "50"}
    state = short_state_dir()
    async with running_engine(state, env) as engine:
        client = engine.client
        bad = await finish(await start(state, "fan-out", "demo:0", "hi", "--folder", str(repo), env=env))
        assert bad.code == 2 and "the count must be 1 or more" in bad.err
        made = await finish(
            await start(state, "fan-out", "demo:2", "hi there", "--folder", str(repo), "--check", "ls", env=env)
        )
        assert made.code == 0, made
        group = made.out.strip()
        ended = await until_answer(
            lambda: client.call(verbs.COMPARE, verbs.GroupRef(group)),
            lambda c: c.ended and all(a.check is not None for a in c.attempts),
            30,
            "both attempts and their checks",
        )
        one, two = ended.attempts
        Path(one.folder, "one.txt").write_text("one\n")
        Path(two.folder, "two.txt").write_text("two\n")

        table = await finish(await start(state, "compare", group, env=env))
        assert table.code == 0 and f"fan-out {group}: hi there" in table.out
        rows = table.out.splitlines()[3:]
        assert rows[0].startswith(one.session_id) and "completed" in rows[0] and "1 file +1" in rows[0]
        assert "passed" in rows[0] and rows[1].startswith(two.session_id)

        checked = await finish(await start(state, "compare", group, "--check", "--json", env=env))
        outputs = [a["check"]["output"] for a in json.loads(checked.out)["attempts"]]
        assert checked.code == 0 and "one.txt" in outputs[0] and "two.txt" in outputs[1]

        picked = await finish(await start(state, "pick", group, one.name, "--discard-others", env=env))
        assert picked.code == 1, picked  # the other was kept: its work is at risk
        assert f"{one.session_id}: its work was committed" in picked.out
        assert f"{two.session_id}: kept:" in picked.out and "two.txt" in picked.out
        assert (repo / "one.txt").read_text() == "one\n" and Path(two.folder, "two.txt").exists()

        forced = await finish(await start(state, "pick", group, one.session_id, "--discard-others", "--force", env=env))
        assert forced.code == 0 and f"{two.session_id}: discarded" in forced.out, forced
        assert not Path(two.folder).exists() and two.branch not in run(repo, "branch", "--format=%(refname:short)")

        unknown = await finish(await start(state, "compare", "nope", env=env))
        assert unknown.code == 1 and "no fan-out 'nope'" in unknown.err
        stranger = await finish(await start(state, "pick", group, "nobody", env=env))
        assert stranger.code == 2 and f"'nobody' is not an attempt of fan-out {group}" in stranger.err

        # A stopped engine's groups come back with it: compare starts it, the discard is said.
        stopped = await finish(await start(state, "engine", "stop", env=env))
        assert stopped.code == 0, stopped
        again = await finish(await start(state, "compare", group, env=env))
        try:
            assert again.code == 0, again
            row = next(r for r in again.out.splitlines() if r.startswith(two.session_id))
            assert " discarded " in row, again.out
        finally:
            await finish(await start(state, "engine", "stop", env=env))
