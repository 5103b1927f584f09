"""The dashboard attached over real OpenSSH to the engine of "another machine" (an sshd on
127.0.0.1 started here, throwaway keys): the engine there is started by the attach, a prompt
gets its reply, and quitting leaves that engine running with its sessions."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Input, TextArea

from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.service.attach import SshAttach, engine_agents
from polypilot_tui.service.remote import RemoteEngine
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.launch import dashboard_on
from polypilot_tui.ui.screens.diff_view import DiffViewScreen
from polypilot_tui.ui.screens.finish import FinishScreen
from polypilot_tui.ui.screens.new_session import NewSessionScreen
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.e2e.dashboard import see, send
from tests.support.engine_service import engine_env, kill_engine_of, short_state_dir
from tests.support.sshd import ALIAS, Sshd, missing_tools
from tests.ui.helpers import wait_for, widget_lines
from tests.workspace.repos import IDENTITY, make_repo, run

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


@pytest.fixture
def sshd() -> Iterator[Sshd]:
    missing = missing_tools()
    if missing:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"{', '.join(missing)} not installed (CI=true: the remote-attach tests must run)")
        pytest.skip(f"{', '.join(missing)} not installed")
    with Sshd() as server:
        yield server


def remote_polypilot(state: Path, extra: dict[str, str] | None = None) -> str:
    """How the "remote" machine runs polypilot: this checkout, its own state folder there (and
    its home folder: the sshd's, not this user's)."""
    env = {k: v for k, v in engine_env(state).items() if k.startswith("POLYPILOT_") and v}
    env.update(extra or {})
    return shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "polypilot_tui"])


def attached_over_ssh(attach: SshAttach, catalog: AgentCatalog, local_state: Path) -> PolypilotApp:
    """The dashboard as ``polypilot --ssh`` builds it, on the tunnel ``attach`` opened."""
    settings = Settings.read(None, state_dir=local_state)
    return dashboard_on(
        settings,
        catalog,
        RemoteEngine(attach.connect, on_detach=attach.close),
        theme_dirs=[BUNDLED_DIR],
        keymap_file=local_state / "no-keymap.toml",
        remote=ALIAS,
    )


async def test_a_dashboard_attached_over_ssh_drives_the_remote_engine_which_outlives_it(sshd: Sshd) -> None:
    remote_state, local_state = short_state_dir(), short_state_dir()
    attach = SshAttach(ALIAS, remote_polypilot(remote_state), ["-F", str(sshd.client_config)])
    try:
        catalog = await engine_agents(await attach.open())
        assert "demo" in catalog.agents and attach.tunnel is not None and attach.tunnel.started
        app = attached_over_ssh(attach, catalog, local_state)
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.selected is not None, timeout=30, what="a session on the remote engine")
            assert f"on {ALIAS}" in app.dashboard.sub_title
            await send(pilot, "hello over ssh")
            await see(pilot, "You said: hello over ssh", timeout=30)
            sid = app.selected
            await pilot.press("ctrl+q")
        assert attach.tunnel is None  # the forward ended with the dashboard
        status = subprocess.run(
            [sys.executable, "-m", "polypilot_tui", "engine", "status", "--json"],
            env=engine_env(remote_state),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert '"sessions": 1' in status.stdout.replace(":1", ": 1")  # the engine there goes on
        # Attaching again finds the same engine and the session, history whole.
        second = SshAttach(ALIAS, remote_polypilot(remote_state), ["-F", str(sshd.client_config)])
        again = RemoteEngine(second.connect, on_detach=second.close)
        await again.start()
        try:
            assert again.ids() == [sid]
            again.history(sid)  # fetched when first asked for
            for _ in range(200):
                if again.history(sid):
                    break
                await asyncio.sleep(0.05)
            assert again.history(sid)[0].text == "hello over ssh"
        finally:
            await again.detach(stop_engine=True)
        await asyncio.sleep(0)
    finally:
        await attach.close()
        kill_engine_of(remote_state)
        shutil.rmtree(remote_state, ignore_errors=True)
        shutil.rmtree(local_state, ignore_errors=True)


async def test_over_ssh_ctrl_n_lists_the_remote_folders_and_a_worktree_is_reviewed_and_committed_there(
    sshd: Sshd,
) -> None:
    """The remote machine's home is the sshd's (not this user's): ctrl+n starts there and
    completes its folders; the worktree is made there, its diff read there, its commit made
    there — the dashboard runs no git."""
    remote_home = sshd.folder / "home"
    repo = make_repo(remote_home / "projects" / "shop")
    (remote_home / "projects" / "docs").mkdir()
    assert Path.home() != remote_home and not (Path.home() / "projects" / "shop").exists()
    remote_state, local_state = short_state_dir(), short_state_dir()
    attach = SshAttach(ALIAS, remote_polypilot(remote_state, IDENTITY), ["-F", str(sshd.client_config)])
    try:
        app = attached_over_ssh(attach, await engine_agents(await attach.open()), local_state)
        async with app.run_test(size=(140, 44), notifications=True) as pilot:
            await wait_for(pilot, lambda: app.selected is not None, timeout=30, what="a session on the remote engine")
            await pilot.press("ctrl+n")
            await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen), what="the new-session dialog")
            dialog = app.screen
            assert isinstance(dialog, NewSessionScreen)
            await wait_for(pilot, lambda: dialog.inspected == "~", what="the remote home looked at")
            assert dialog.folder_info is not None and dialog.folder_info.folder == str(remote_home.resolve())
            folder = dialog.query_one("#folder", Input)
            folder.focus()
            folder.value = ""
            await pilot.press(*"~/projects/s")  # typed: each key asks the remote engine for a completion
            await wait_for(pilot, lambda: "~/projects/shop/" in "".join(widget_lines(folder)), what="completed there")
            await pilot.press("right")
            await wait_for(pilot, lambda: dialog.folder_info is not None and dialog.folder_info.is_git)
            assert dialog.folder_info is not None and dialog.folder_info.repo == str(repo)
            await pilot.click("#worktree")
            name = dialog.query_one("#name", Input)
            name.value = "remote fix"
            name.focus()
            await pilot.press("enter")
            await wait_for(pilot, lambda: len(app.engine.ids()) == 2, timeout=30, what="the session made there")
            sid = app.engine.ids()[-1]
            workspace = app.engine.view(sid).workspace
            assert workspace is not None and workspace.branch == "polypilot/remote-fix"
            worktree = Path(workspace.folder)
            assert worktree.is_relative_to(remote_state / "worktrees")
            (worktree / "README.md").write_text("hello\nfrom afar\n")  # the agent's work, there
            await wait_for(pilot, lambda: app.selected == sid, what="the new session on screen")
            await pilot.press("ctrl+o")
            await wait_for(pilot, lambda: isinstance(app.screen, DiffViewScreen), timeout=30, what="the diff view")
            diff = app.screen
            assert isinstance(diff, DiffViewScreen)
            assert [f.path for f in diff.changes.files] == ["README.md"] and diff.changes.stats.added == 1
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, DiffViewScreen))
            await pilot.press("f5")
            await wait_for(pilot, lambda: isinstance(app.screen, FinishScreen), what="Finish")
            finish = app.screen
            assert isinstance(finish, FinishScreen)
            message = finish.query_one("#commit-message", TextArea)
            await wait_for(pilot, lambda: bool(message.text), timeout=30, what="the message drafted there")
            message.load_text("Greet from afar")
            await pilot.click("#commit")
            await wait_for(pilot, lambda: "Committed" in str(finish.query_one("#finish-result").render()), timeout=30)
            assert run(repo, "log", "-1", "--format=%s", "polypilot/remote-fix") == "Greet from afar"
            await pilot.press("escape")
            await pilot.press("ctrl+q")
    finally:
        await attach.close()
        kill_engine_of(remote_state)
        shutil.rmtree(remote_state, ignore_errors=True)
        shutil.rmtree(local_state, ignore_errors=True)
