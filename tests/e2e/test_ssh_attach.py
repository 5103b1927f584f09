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

from polypilot_tui.config import Settings
from polypilot_tui.service.attach import SshAttach, engine_agents
from polypilot_tui.service.remote import RemoteEngine
from polypilot_tui.ui.launch import dashboard_on
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.e2e.dashboard import see, send
from tests.support.engine_service import engine_env, kill_engine_of, short_state_dir
from tests.support.sshd import ALIAS, Sshd, missing_tools
from tests.ui.helpers import wait_for

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


def remote_polypilot(state: Path) -> str:
    """How the "remote" machine runs polypilot: this checkout, its own state folder there."""
    env = {k: v for k, v in engine_env(state).items() if k.startswith("POLYPILOT_") and v}
    return shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "polypilot_tui"])


async def test_a_dashboard_attached_over_ssh_drives_the_remote_engine_which_outlives_it(sshd: Sshd) -> None:
    remote_state, local_state = short_state_dir(), short_state_dir()
    attach = SshAttach(ALIAS, remote_polypilot(remote_state), ["-F", str(sshd.client_config)])
    try:
        catalog = await engine_agents(await attach.open())
        assert "demo" in catalog.agents and attach.tunnel is not None and attach.tunnel.started
        settings = Settings(_env_file=None, state_dir=local_state)  # type: ignore[call-arg]
        app = dashboard_on(
            settings,
            catalog,
            RemoteEngine(attach.connect, on_detach=attach.close),
            theme_dirs=[BUNDLED_DIR],
            keymap_file=local_state / "no-keymap.toml",
            remote=ALIAS,
        )
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.selected is not None, timeout=30, what="a session on the remote engine")
            assert f"on {ALIAS}" in app.sub_title
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
