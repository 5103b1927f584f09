"""One task fanned out into worktrees, compared, checked, one picked and the others discarded:
the engine in this process on demo agents, real git repositories, the check a real shell.

The demo agent writes no files: the tests write an attempt's work into its worktree as an
agent would, between its turn's end and the compare."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.commands.fan_out import format_comparison
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings, WatchdogSettings, demo_agent
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.fan_out import Comparison, Group
from polypilot_tui.engine import fan_out, verbs
from polypilot_tui.engine.api import BadRequest, EngineError, UnknownGroup
from polypilot_tui.engine.builder import build_engine
from polypilot_tui.engine.fan_out_groups import GROUPS_FILE, GroupsFile
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.workspaces import WorkspaceDesk
from polypilot_tui.infra.private import NotPrivate
from tests.support.waiting import until_answer
from tests.workspace.repos import make_repo, run

CATALOG = AgentCatalog({"demo": demo_agent(), "hanging": AgentConfig(name="hanging", kind="demo", script="hang")})


def settings(tmp_path: Path) -> Settings:
    return Settings.read(
        None,
        state_dir=tmp_path / "state",
        record=False,
        demo_speed=50,
        watchdog=WatchdogSettings(inactivity=1.0),
    )


def engine(tmp_path: Path) -> LocalEngine:
    ids = itertools.count(1)
    return LocalEngine(SessionManager(settings(tmp_path), CATALOG, SystemClock(), id_factory=lambda: f"s{next(ids)}"))


async def all_ended(local: LocalEngine, group: str) -> Comparison:
    """The comparison once every attempt's turn ended and no check runs."""
    await until_answer(
        lambda: local.call(verbs.COMPARE, verbs.GroupRef(group)),
        lambda c: c.ended and not any(a.checking for a in c.attempts),
        30,
        "every attempt to end",
    )
    await local.fan_outs.idle()
    return await local.call(verbs.COMPARE, verbs.GroupRef(group))


async def test_fan_out_compare_check_pick_and_discard(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    local = engine(tmp_path)
    try:
        group = await local.call(
            verbs.FAN_OUT,
            verbs.FanOut("hi there", ("demo", "demo", "hanging"), str(repo), check="test -f answer.txt && echo passed"),
        )
        ids = local.ids()
        assert len(ids) == 3 and {local.view(sid).attempt_of for sid in ids} == {group}
        folders = {local.view(sid).workspace.folder for sid in ids}  # type: ignore[union-attr]
        assert len(folders) == 3 and str(repo) not in folders  # a worktree each, never the checkout
        comparison = await all_ended(local, group)
        one, two, hung = comparison.attempts
        assert (one.outcome, two.outcome, hung.outcome) == ("completed", "completed", "stuck")
        assert "no activity" in hung.reason, hung  # the watchdog's own words
        assert comparison.base == "main" and comparison.task == "hi there"
        assert all(a.check is not None and a.check.exit_code == 1 for a in comparison.attempts)  # ran at each end
        assert all(a.seconds > 0 for a in comparison.attempts) and hung.seconds >= 1.0

        Path(one.folder, "answer.txt").write_text("42\n")
        Path(two.folder, "other.txt").write_text("43\n")
        checked = await local.call(verbs.RUN_CHECK, verbs.GroupRef(group))
        one, two, hung = checked.attempts
        assert one.check is not None and one.check.passed and one.check.output == "passed\n"
        assert two.check is not None and two.check.exit_code == 1
        assert (one.changes.files, one.changes.added, two.changes.files) == (1, 1, 1)

        picked = await local.call(verbs.PICK, verbs.Pick(group, one.session_id, discard_others=True))
        assert picked.merge.merged and len(picked.committed) == 40
        assert (repo / "answer.txt").read_text() == "42\n"  # merged into main, in the checkout
        kept = {d.session_id: d for d in picked.discarded}
        assert not kept[two.session_id].discarded and "other.txt" in kept[two.session_id].message
        assert Path(two.folder, "other.txt").exists()  # work at risk: named, never removed silently
        assert kept[hung.session_id].discarded  # nothing at risk there
        assert not Path(hung.folder).exists()

        forced = await local.call(verbs.PICK, verbs.Pick(group, one.session_id, discard_others=True, force=True))
        assert [d.discarded for d in forced.discarded] == [True]  # asked with force: the other goes now
        assert not Path(two.folder).exists()
        assert (await local.call(verbs.COMPARE, verbs.GroupRef(group))).picked == one.session_id
        branches = run(repo, "branch", "--format=%(refname:short)").split()
        assert two.branch not in branches and hung.branch not in branches and one.branch in branches
    finally:
        await local.close()


async def test_bad_fan_outs_are_refused_and_make_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    plain = tmp_path / "plain"
    plain.mkdir()
    local = engine(tmp_path)
    cases: list[tuple[verbs.FanOut, type[Exception], str]] = [
        (verbs.FanOut("task", (), str(repo)), BadRequest, "1 to 8 attempts"),
        (verbs.FanOut("task", ("demo",) * 9, str(repo)), BadRequest, "1 to 8 attempts"),
        (verbs.FanOut(" \n", ("demo",), str(repo)), BadRequest, "the task is empty"),
        (verbs.FanOut("task", ("demo", "nosuch"), str(repo)), EngineError, "nosuch"),
        (verbs.FanOut("task", ("demo",), str(plain)), EngineError, "not in a git repository"),
        (verbs.FanOut("task", ("demo",), ""), BadRequest, "name the repository"),
        (verbs.FanOut("task", ("demo",), "relative/path"), BadRequest, "not an absolute folder"),
        (verbs.FanOut("task", ("demo",), str(repo), base="no-such-branch"), EngineError, "no-such-branch"),
        (verbs.FanOut("task", ("demo",), str(repo), check="x" * 5000), BadRequest, "at most 4096"),
        (verbs.FanOut("task", ("demo",), str(repo), check="true", check_timeout=0), BadRequest, "timeout"),
    ]
    try:
        for request, error, words in cases:
            with pytest.raises(error, match=words):
                await local.call(verbs.FAN_OUT, request)
        assert local.ids() == []
        assert run(repo, "branch", "--format=%(refname:short)") == "main"
        assert run(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
        with pytest.raises(UnknownGroup):
            await local.call(verbs.COMPARE, verbs.GroupRef("nope"))
    finally:
        await local.close()


async def test_a_fan_out_is_remembered_across_a_restart(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first = build_engine(settings(tmp_path), CATALOG)
    await first.start()
    try:
        group = await first.call(verbs.FAN_OUT, verbs.FanOut("hi there", ("demo", "demo"), str(repo), check="true"))
        before = await all_ended(first, group)
    finally:
        await first.close()
    saved = Path(settings(tmp_path).state_dir, GROUPS_FILE)
    assert saved.stat().st_mode & 0o777 == 0o600 and len(saved.read_text().splitlines()) == 1
    second = build_engine(settings(tmp_path), CATALOG)
    await second.start()
    try:
        after = await second.call(verbs.COMPARE, verbs.GroupRef(group))
        assert [(a.session_id, a.outcome, a.seconds, a.check) for a in after.attempts] == [
            (a.session_id, a.outcome, a.seconds, a.check) for a in before.attempts
        ]
        assert {second.view(a.session_id).attempt_of for a in after.attempts} == {group}
    finally:
        await second.close()


async def test_a_key_the_check_prints_reaches_no_file_nor_the_compare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "ghp_fanOutCheckSecret0123456789abcdefXYZ"
    monkeypatch.setenv("FANOUT_TEST_TOKEN", secret)  # the user's own: the check may read it, we keep no copy
    repo = make_repo(tmp_path / "repo")
    local = build_engine(settings(tmp_path), CATALOG)
    await local.start()
    try:
        task = f"hi there {secret}"
        group = await local.call(
            verbs.FAN_OUT, verbs.FanOut(task, ("demo",), str(repo), check="echo $FANOUT_TEST_TOKEN")
        )
        (attempt,) = (await all_ended(local, group)).attempts
        assert attempt.check is not None and attempt.check.passed
        assert secret not in attempt.check.output and attempt.check.output.strip()  # said, redacted
    finally:
        await local.close()
    state = Path(settings(tmp_path).state_dir)
    for path in state.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


async def test_an_attempt_interrupted_by_a_restart_ends_with_its_resent_turn(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first = build_engine(settings(tmp_path), CATALOG)
    await first.start()
    try:
        group = await first.call(verbs.FAN_OUT, verbs.FanOut("!slow", ("demo",), str(repo), check="true"))
        (sid,) = first.ids()
        await until_answer(lambda: first.call(verbs.SESSION_VIEW, verbs.SessionRef(sid)), lambda v: v.status.busy, 10)
    finally:
        await first.close()  # the quit interrupts the turn: not the attempt's own end
    second = build_engine(settings(tmp_path), CATALOG)
    await second.start()
    try:
        (attempt,) = (await second.call(verbs.COMPARE, verbs.GroupRef(group))).attempts
        assert (attempt.outcome, attempt.check) == ("aborted", None)  # no check ran as the engine stopped
        assert await second.call(verbs.RESEND, verbs.SessionRef(sid))
        comparison = await until_answer(
            lambda: second.call(verbs.COMPARE, verbs.GroupRef(group)),
            lambda c: c.attempts[0].outcome == "completed" and c.attempts[0].check is not None,
            30,
            "the resent turn's end and its check",
        )
        (attempt,) = comparison.attempts
        assert attempt.check is not None and attempt.check.passed
    finally:
        await second.close()


async def test_an_attempt_that_cannot_be_made_undoes_those_made_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    local = engine(tmp_path)
    real_prepare = WorkspaceDesk.prepare
    made: list[object] = []

    async def second_fails(self: WorkspaceDesk, *args: Any) -> Any:
        if made:  # the disk fills up, say, while the second worktree is made
            raise EngineError("no space left on device")
        made.append(await real_prepare(self, *args))
        return made[-1]

    monkeypatch.setattr(WorkspaceDesk, "prepare", second_fails)
    try:
        with pytest.raises(EngineError, match="no space left"):
            await local.call(verbs.FAN_OUT, verbs.FanOut("task", ("demo", "demo"), str(repo)))
        assert made and local.ids() == []  # the first was made, then undone
        assert run(repo, "branch", "--format=%(refname:short)") == "main"
        assert run(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    finally:
        await local.close()


async def test_a_fan_out_over_the_sessions_limit_makes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fan_out, "SESSIONS", 2)
    repo = make_repo(tmp_path / "repo")
    local = engine(tmp_path)
    try:
        local.manager.add_session("demo", "already here", connect=False)
        with pytest.raises(EngineError, match="over the 2 the engine holds"):
            await local.call(verbs.FAN_OUT, verbs.FanOut("task", ("demo", "demo"), str(repo)))
        assert len(local.ids()) == 1 and run(repo, "branch", "--format=%(refname:short)") == "main"
    finally:
        await local.close()


async def test_a_check_that_cannot_run_in_a_gone_worktree_says_so(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    local = engine(tmp_path)
    try:
        group = await local.call(verbs.FAN_OUT, verbs.FanOut("hi there", ("demo",), str(repo), check="true"))
        (attempt,) = (await all_ended(local, group)).attempts
        shutil.rmtree(attempt.folder)  # deleted behind the app's back
        await local.call(verbs.REFRESH_CHANGES, verbs.SessionRef(attempt.session_id))
        await local.changes.idle()
        (checked,) = (await local.call(verbs.RUN_CHECK, verbs.GroupRef(group))).attempts
        assert checked.check is not None and not checked.check.passed
        assert checked.check.verdict == "could not run" and "gone" in checked.check.error, checked.check
    finally:
        await local.close()


async def test_an_attempt_discarded_by_finish_is_marked_in_the_compare_and_not_checked_again(tmp_path: Path) -> None:
    """A discard outside a pick (Finish, ``finish discard``, the compare's second question) is
    an attempt's end too: the compare says so, and the check is not run in a folder now gone."""
    repo = make_repo(tmp_path / "repo")
    local = engine(tmp_path)
    try:
        group = await local.call(verbs.FAN_OUT, verbs.FanOut("hi there", ("demo", "demo"), str(repo), check="true"))
        first, second = (await all_ended(local, group)).attempts
        await local.call(verbs.DISCARD, verbs.Discard(second.session_id, force=True))
        compared = await local.call(verbs.RUN_CHECK, verbs.GroupRef(group))
        one, two = compared.attempts
        assert two.discarded and not one.discarded
        assert two.check is not None and two.check.verdict == "passed"  # as it was: not run again
        line = next(row for row in format_comparison(compared).splitlines() if row.startswith(second.session_id))
        assert " discarded " in line
    finally:
        await local.close()


async def test_a_change_of_one_group_redacts_that_group_alone_and_saves_every_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The groups file holds up to 200 groups of checks' output (megabytes): a change redacts
    the group that changed, not every group, and the file is written off the loop, whole."""
    repo = make_repo(tmp_path / "repo")
    local = build_engine(settings(tmp_path), CATALOG)
    await local.start()
    try:
        groups = []
        for _ in range(2):
            made = await local.call(verbs.FAN_OUT, verbs.FanOut("hi there", ("demo",), str(repo), check="true"))
            await all_ended(local, made)
            groups.append(made)
        scrubbed: list[str] = []
        real = fan_out.REDACTOR.scrub

        def counting(value: Any) -> Any:
            if isinstance(value, Group):
                scrubbed.append(value.group)
            return real(value)

        monkeypatch.setattr(fan_out.REDACTOR, "scrub", counting)
        await local.call(verbs.RUN_CHECK, verbs.GroupRef(groups[1]))
        await all_ended(local, groups[1])
        await local.fan_outs.saved()
        assert scrubbed and set(scrubbed) == {groups[1]}
        saved = Path(settings(tmp_path).state_dir, GROUPS_FILE).read_text().splitlines()
        assert len(saved) == 2 and all(any(g in line for line in saved) for g in groups)
    finally:
        await local.close()


async def test_checks_run_a_few_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fan_out, "CHECKS_AT_ONCE", 2)
    repo = make_repo(tmp_path / "repo")
    log = tmp_path / "log"
    # Each check says when it starts and ends; with two at once, never three are between.
    check = f"echo start >> {log}; sleep 0.3; echo end >> {log}"
    local = engine(tmp_path)
    try:
        group = await local.call(verbs.FAN_OUT, verbs.FanOut("hi there", ("demo",) * 4, str(repo), check=check))
        comparison = await all_ended(local, group)
        assert all(a.check is not None and a.check.passed for a in comparison.attempts)
        running = most = 0
        for line in log.read_text().split():
            running += 1 if line == "start" else -1
            most = max(most, running)
        assert most == 2
    finally:
        await local.close()


def test_the_groups_file_is_kept_private_and_never_under_a_folder_others_write(tmp_path: Path) -> None:
    """Its folder is made (or checked) as the engine's other state: 0700, never below a folder
    every user may write, where another could swap it for theirs."""
    mine = GroupsFile(tmp_path / "mine" / "state")
    mine.save([])
    assert (tmp_path / "mine" / "state").stat().st_mode & 0o777 == 0o700
    assert mine.path.stat().st_mode & 0o777 == 0o600
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(NotPrivate):
        GroupsFile(shared / "state").save([])
    assert not (shared / "state").exists()


async def test_every_attempt_of_a_sandboxed_fan_out_is_sandboxed(tmp_path: Path) -> None:
    """The demo agent runs no process: its sessions are marked sandboxed (docs/sandbox.md)."""
    from polypilot_tui.agents.sandbox import sandbox_problem
    from polypilot_tui.domain.sandbox import Sandbox, SandboxMode

    boxed = Sandbox(SandboxMode.WORKSPACE)
    if sandbox_problem(boxed) is not None:
        pytest.skip("no sandbox here: a sandboxed fan-out is refused (tests/unit/test_sandbox_sessions.py)")
    repo = make_repo(tmp_path / "repo")
    local = engine(tmp_path)
    try:
        await local.call(verbs.FAN_OUT, verbs.FanOut("hi", ("demo", "demo"), str(repo), sandbox=boxed))
        assert [local.view(sid).sandbox for sid in local.ids()] == [boxed, boxed]
        await local.call(verbs.FAN_OUT, verbs.FanOut("hi", ("demo",), str(repo)))  # none asked: the agent's (off)
        assert not local.view(local.ids()[-1]).sandbox.on
    finally:
        await local.close()
