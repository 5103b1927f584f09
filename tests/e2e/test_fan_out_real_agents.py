"""One task fanned out to two real agents — the Copilot CLI and opencode over ACP — each in a
worktree of its own from one base, against the scripted model server; then the check run in
each worktree, the compare, one attempt picked (its work committed and merged into main) and
the other discarded: refused first, naming its work at risk, then forced.

The engine runs in this process (the verbs are the service's: tests/unit/test_verbs.py checks
they answer alike); each agent's shell tool writes the file, allowed by the policy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from polypilot_tui.agents.npm_cache import OPENCODE, NpmAgent
from polypilot_tui.config import AgentCatalog, PermissionPolicy, Settings
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.fan_out import Comparison
from polypilot_tui.engine import verbs
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from tests.support.acp_agents import opencode_agent
from tests.support.copilot_e2e import KEY, KEY_ENV
from tests.support.copilot_harness import catalog_entry
from tests.support.model_server import ModelServer
from tests.support.waiting import until_answer
from tests.workspace.repos import IDENTITY, make_repo, run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

TASK = "TOOL CMD=`printf 'the answer\\n' > answer.txt`"
CHECK = 'test -f answer.txt && echo "found; key=${' + KEY_ENV + ':-none}"'


async def test_fan_out_to_copilot_and_opencode_compare_pick_and_discard(
    copilot_cli: Path,
    npm_agent: Callable[[NpmAgent], Path],
    model_server: ModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {**IDENTITY, KEY_ENV: KEY}.items():  # the key is in the engine's environment
        monkeypatch.setenv(name, value)
    repo = make_repo(tmp_path / "repo", {"README.md": "hello\n"})
    catalog = AgentCatalog(
        {
            "copilot": catalog_entry(copilot_cli, model_server, tmp_path),
            "opencode": opencode_agent(npm_agent(OPENCODE), model_server, tmp_path / "opencode-home"),
        }
    )
    settings = Settings.read(None, state_dir=tmp_path / "state", record=False, permission_policy=PermissionPolicy.ALLOW)
    local = LocalEngine(SessionManager(settings, catalog, SystemClock()))
    try:
        request = verbs.FanOut(TASK, ("copilot", "opencode"), str(repo), check=CHECK, check_timeout=60)
        group = await local.call(verbs.FAN_OUT, request)

        async def compared() -> Comparison:
            return await local.call(verbs.COMPARE, verbs.GroupRef(group))

        await until_answer(compared, lambda c: c.ended and not any(a.checking for a in c.attempts), 150, "both ends")
        await local.fan_outs.idle()
        copilot, opencode = (await compared()).attempts
        for attempt in (copilot, opencode):
            assert attempt.outcome == "completed", attempt
            assert Path(attempt.folder, "answer.txt").read_text() == "the answer\n"
            assert (attempt.changes.files, attempt.changes.added) == (1, 1), attempt
            assert attempt.check is not None and attempt.check.passed, attempt.check
            assert attempt.check.output == "found; key=none\n"  # the app's key is not the check's to read
            assert attempt.seconds > 0
        assert not (repo / "answer.txt").exists()  # the checkout is untouched until a pick

        picked = await local.call(verbs.PICK, verbs.Pick(group, copilot.session_id, discard_others=True))
        assert picked.merge.merged and picked.committed
        assert (repo / "answer.txt").read_text() == "the answer\n"
        assert run(repo, "status", "--porcelain") == ""
        (kept,) = picked.discarded
        assert not kept.discarded and "answer.txt" in kept.message and Path(opencode.folder).exists()

        forced = await local.call(verbs.PICK, verbs.Pick(group, copilot.session_id, discard_others=True, force=True))
        assert [d.discarded for d in forced.discarded] == [True] and not Path(opencode.folder).exists()
        assert opencode.branch not in run(repo, "branch", "--format=%(refname:short)").split()
    finally:
        await local.close()
