"""What the dashboard imports before its first frame is a fixed, reviewed list (issue 25).

The dashboard attached to an engine (``polypilot`` as a user starts it, on Textual's headless
driver) reports, once its first frame with the sessions and the prompt is drawn, every module
it has imported: a module of ours or a third-party package not in the lists below sneaked into
the start (a dialog, the diff view, the in-process engine, an SDK…) and fails the test, named.
Import it where it is first used, or, if the first frame needs it, add it here with a reason.
The timings themselves are in the bench (bench/process_start.py).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from polypilot_tui.domain.hosts import HostEntry
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.verbs import NEW_SESSION, NewSession
from polypilot_tui.service.hosts_file import add_host, hosts_path
from tests.support.engine import Harness
from tests.support.engine_service import engine_env, serving_in_process
from tests.support.processes import communicated

REPORT_WAIT = 60.0
"""Real seconds the dashboard has to reach its first frame (a hang guard, not a target)."""

OURS = frozenset(
    {
        "polypilot_tui",
        "polypilot_tui.agents",
        "polypilot_tui.agents.base",
        "polypilot_tui.agents.catalog",
        "polypilot_tui.cli",
        "polypilot_tui.commands",
        "polypilot_tui.commands.output",
        "polypilot_tui.config",
        "polypilot_tui.domain",
        "polypilot_tui.domain.agents",
        "polypilot_tui.domain.changeset",
        "polypilot_tui.domain.chat",
        "polypilot_tui.domain.clock",
        "polypilot_tui.domain.dataclass_on_use",  # our records, made on first use
        "polypilot_tui.domain.entry_errors",
        "polypilot_tui.domain.events",
        "polypilot_tui.domain.exit_status",
        "polypilot_tui.domain.failures",
        "polypilot_tui.domain.fan_out",
        "polypilot_tui.domain.gathered",
        "polypilot_tui.domain.history",
        "polypilot_tui.domain.hosts",
        "polypilot_tui.domain.limits",
        "polypilot_tui.domain.model_choice",
        "polypilot_tui.domain.names",
        "polypilot_tui.domain.patterns",  # compile_later: the patterns of the modules above, compiled on first use
        "polypilot_tui.domain.pass_env",
        "polypilot_tui.domain.permissions",
        "polypilot_tui.domain.probes",
        "polypilot_tui.domain.prompt_queue",
        "polypilot_tui.domain.sandbox",
        "polypilot_tui.domain.records",
        "polypilot_tui.domain.safe_json",
        "polypilot_tui.domain.session",
        "polypilot_tui.domain.team",
        "polypilot_tui.domain.text",
        "polypilot_tui.domain.tool_servers",
        "polypilot_tui.domain.trace",
        "polypilot_tui.domain.turn",
        "polypilot_tui.domain.urls",
        "polypilot_tui.domain.usage",
        "polypilot_tui.domain.view",
        "polypilot_tui.domain.watchdog",
        "polypilot_tui.domain.workspace",
        "polypilot_tui.engine",
        "polypilot_tui.engine.api",
        "polypilot_tui.engine.codec",
        "polypilot_tui.engine.stream",
        "polypilot_tui.engine.verbs",
        "polypilot_tui.entry",
        "polypilot_tui.infra",
        "polypilot_tui.infra.conversion_errors",  # msgspec's errors read, for the settings and the codec
        "polypilot_tui.infra.event_loop",  # the loop the dashboard runs on
        "polypilot_tui.infra.logs",
        "polypilot_tui.infra.notify_command",
        "polypilot_tui.infra.notify_escapes",
        "polypilot_tui.infra.private",
        "polypilot_tui.infra.redact",
        "polypilot_tui.infra.secret_shapes",
        "polypilot_tui.infra.settings_sources",
        "polypilot_tui.service",
        "polypilot_tui.service.address",
        "polypilot_tui.service.client",
        "polypilot_tui.service.histories",
        "polypilot_tui.service.hosts_file",  # the hosts file says whether this start is a fleet
        "polypilot_tui.service.peer",
        "polypilot_tui.service.remote",
        "polypilot_tui.service.spawn",
        "polypilot_tui.service.sse",
        "polypilot_tui.service.unix_http",
        "polypilot_tui.storage",
        "polypilot_tui.storage.lock",
        "polypilot_tui.storage.notices",
        "polypilot_tui.ui",
        "polypilot_tui.ui.action_failures",
        "polypilot_tui.ui.app",
        "polypilot_tui.ui.attention",
        "polypilot_tui.ui.broadcast",
        "polypilot_tui.ui.css_tokens",  # the style sources' tokens, kept from the last start
        "polypilot_tui.ui.formatting",
        "polypilot_tui.ui.host_text",  # the sidebar's host headers
        "polypilot_tui.ui.keymap",
        "polypilot_tui.ui.launch",
        "polypilot_tui.ui.notifier",
        "polypilot_tui.ui.quit_signals",
        "polypilot_tui.ui.screens",
        "polypilot_tui.ui.screens.compare_flow",
        "polypilot_tui.ui.screens.dashboard",
        "polypilot_tui.ui.screens.fan_out_flow",
        "polypilot_tui.ui.screens.new_session_flow",
        "polypilot_tui.ui.screens.review_flow",
        "polypilot_tui.ui.screens.team_flow",
        "polypilot_tui.ui.stylesheet",  # the app's stylesheet, each source parsed once
        "polypilot_tui.ui.team_tree",
        "polypilot_tui.ui.terminal",
        "polypilot_tui.ui.theming",
        "polypilot_tui.ui.ui_state",
        "polypilot_tui.ui.usage_text",
        "polypilot_tui.ui.welcome",
        "polypilot_tui.ui.widgets",
        "polypilot_tui.ui.widgets.chat_header",
        "polypilot_tui.ui.widgets.chat_log",
        "polypilot_tui.ui.widgets.chat_pane",
        "polypilot_tui.ui.widgets.interrupted_notice",
        "polypilot_tui.ui.widgets.key_footer",
        "polypilot_tui.ui.widgets.notice_message",
        "polypilot_tui.ui.widgets.permission_banner",
        "polypilot_tui.ui.widgets.permission_prompt",
        "polypilot_tui.ui.widgets.prompt_editor",
        "polypilot_tui.ui.widgets.queue_panel",
        "polypilot_tui.ui.widgets.reasoning_block",
        "polypilot_tui.ui.widgets.session_list",
        "polypilot_tui.ui.widgets.session_sidebar",
        "polypilot_tui.ui.widgets.status_line",
        "polypilot_tui.ui.widgets.tool_call_row",
        "polypilot_tui.ui.widgets.user_message",
    }
)
"""Our modules the first frame needs."""

THIRD_PARTY = frozenset(
    {
        "h11",  # HTTP/1.1 of the engine's client (service/unix_http.py)
        "msgspec",  # the settings (config.py) and the engine's codec (engine/codec.py)
        "platformdirs",  # the config and state folders
        "rich",  # Textual's
        "textual",  # the UI
        "typing_extensions",  # Textual's, msgspec's
    }
)
"""Third-party packages (top-level names) the first frame needs."""

DASHBOARD = textwrap.dedent(
    """
    import gc
    import sys
    from pathlib import Path

    from polypilot_tui.ui.app import PolypilotApp

    mounted = PolypilotApp.on_mount
    report_to = Path(sys.argv.pop())

    async def on_mount(self):
        collecting = gc.isenabled()  # before the first frame
        await mounted(self)  # the engine attached, its sessions shown, the prompt focused

        def report():
            names = sorted(m for m in sys.modules if m.startswith("polypilot_tui"))
            names += sorted({m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names))
            shown = " ".join(self.engine.ids()) + "|" + self.pane.editor.placeholder
            collections = f"collecting at mount: {collecting}, after the first frame: {gc.isenabled()}"
            from polypilot_tui.domain.dataclass_on_use import pending_count
            from polypilot_tui.engine import verbs
            from polypilot_tui.domain import hosts, watchdog
            # made (a dataclass is made on first use): a request sent, or a module-level instance
            # (a default) that makes its class at import, for a start that never uses it
            unused = (verbs.Send, watchdog.Decision, watchdog.WatchdogConfig, hosts.Backoff)
            made = " ".join(c.__name__ for c in unused if "__match_args__" in vars(c)) or "none"
            waiting = f"waiting: {pending_count()} {made}"
            # a request or reply of these made: the dashboard asked the engine more than its stream
            kinds = ("EngineInfo", "HistoryRange", "HistoryPage", "Focus", "AgentOffer")
            asked = "asked: " + " ".join(k for k in kinds if "__match_args__" in vars(getattr(verbs, k)))
            buttons = f"buttons: {len(self.screen.query('Button'))}"
            styles = f"tokenized: {self.style_tokens.tokenized}"
            report_to.write_text("\\n".join([shown, collections, buttons, waiting, asked, styles, *names]))
            self.exit()

        self.call_after_refresh(report)

    PolypilotApp.on_mount = on_mount
    from polypilot_tui import entry  # as the `polypilot` script starts

    sys.exit(entry.main())
    """
)


async def first_frame(env: dict[str, str], cwd: Path) -> list[str]:
    """What a dashboard started by ``entry.main`` reported at its first frame (see DASHBOARD)."""
    report = cwd / "imported.txt"
    report.unlink(missing_ok=True)
    dashboard = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        DASHBOARD,
        str(report),
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    said, _ = await communicated(dashboard, REPORT_WAIT)
    assert report.exists(), f"the dashboard reported nothing: {said.decode(errors='replace')[-2000:]}"
    return report.read_text().splitlines()


async def test_the_first_frame_imports_only_the_reviewed_modules(harness: Harness, tmp_path: Path) -> None:
    engine = LocalEngine(harness.manager)
    await engine.call(NEW_SESSION, NewSession("demo", "first"))
    async with serving_in_process(engine) as socket:
        env = engine_env(socket.parent, {"POLYPILOT_CONFIG_DIR": str(tmp_path / "config")})
        env["TEXTUAL_DRIVER"] = "textual.drivers.headless_driver:HeadlessDriver"
        shown, collections, buttons, waiting, asked, styles, *names = await first_frame(env, tmp_path)
        again = await first_frame(env, tmp_path)  # the next start, with the style tokens kept by this one
    assert shown.startswith("s1|Message first"), shown  # the first frame had the session and its prompt
    # No collection walks start-up's objects before the first frame (entry.py); after it, they run.
    assert collections == "collecting at mount: False, after the first frame: True"
    # A hidden button (reconnect, resend, the queue's, "show earlier") cost the frame ~2 ms of
    # styling each: each is mounted when first shown.
    assert buttons == "buttons: 0"
    # Most of our record classes wait for their first use (~0.5 ms each made: domain/dataclass_on_use.py),
    # the verbs' requests among them (nothing was sent yet), and those only the engine or a fleet
    # uses (the watchdog's decisions and tiers, a host's backoff): no default instance made at import.
    pending, made = waiting.split(maxsplit=2)[1:]
    assert int(pending) > 50 and made == "none", waiting
    # Before it, the engine was asked for its stream alone (its snapshot shows the sessions): not
    # who it is, nor the shown chat's rows, the agents it can start or where the focus is.
    assert asked == "asked: ", asked
    # The style sources were tokenized at the first start, and kept: the next parsed them from
    # their tokens (ui/css_tokens.py), and showed the same.
    assert int(styles.split()[1]) > 20 and again[5] == "tokenized: 0", (styles, again[5])
    assert again[0] == shown
    ours = [n for n in names if n.startswith("polypilot_tui")]
    third = [n for n in names if not n.startswith(("polypilot_tui", "_"))]  # "_": the interpreter's own
    sneaked = sorted(set(ours) - OURS) + sorted(set(third) - THIRD_PARTY)
    assert not sneaked, f"imported before the first frame (import where first used, or review and list): {sneaked}"


SPAWN_FIRST = textwrap.dedent(
    """
    import sys

    from polypilot_tui import cli
    from polypilot_tui.service import spawn

    def spawned(settings):
        print("spawned with", sorted(m for m in sys.modules if m.startswith(("textual", "polypilot_tui.ui"))))
        raise SystemExit(0)

    spawn.spawn_engine = spawned
    sys.exit(cli.main([]))
    """
)


@pytest.mark.parametrize("fleet", [False, True], ids=["plain", "fleet"])
def test_with_no_engine_the_dashboard_spawns_it_before_importing_its_ui(tmp_path: Path, fleet: bool) -> None:
    """The engine loads while the dashboard's UI does: it is spawned before Textual is imported,
    on a plain start and on a fleet's (hosts configured: `polypilot` is run_fleet) alike."""
    env = engine_env(tmp_path / "state", {"POLYPILOT_CONFIG_DIR": str(tmp_path / "config")})
    if fleet:  # a host nothing listens for: the spawn comes before any ssh is tried
        add_host(hosts_path(tmp_path / "config"), HostEntry.checked("box", "nobody@127.0.0.1:9", "polypilot", ()))
    done = subprocess.run(
        [sys.executable, "-c", SPAWN_FIRST], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert "spawned with []" in done.stdout, done.stdout + done.stderr


COMMAND_COLLECTS = textwrap.dedent(
    """
    import gc
    import sys

    from polypilot_tui.commands import status

    def print_status(settings, json_mode):
        print("collecting:", gc.isenabled())
        return 0

    status.print_status = print_status
    from polypilot_tui import entry

    sys.argv[1:] = ["status"]
    sys.exit(entry.main())
    """
)


def test_every_other_command_collects_garbage_as_it_runs(tmp_path: Path) -> None:
    """Only the dashboard's start runs without collections: a command (``status`` here, as
    every one but the dashboard) turns them back on once its arguments are read."""
    env = engine_env(tmp_path / "state", {"POLYPILOT_CONFIG_DIR": str(tmp_path / "config")})
    done = subprocess.run(
        [sys.executable, "-c", COMMAND_COLLECTS], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert "collecting: True" in done.stdout, done.stdout + done.stderr


ENGINE_COLLECTS = textwrap.dedent(
    """
    import asyncio
    import gc
    import sys

    from polypilot_tui.commands import engine

    async def serve(settings, catalog, ready):
        print("collecting while it starts:", gc.isenabled())
        ready.set()
        while not gc.isenabled():
            await asyncio.sleep(0.01)
        print("frozen once it listens:", gc.get_freeze_count() > 0)
        return 0

    engine.serve = serve
    from polypilot_tui import entry

    sys.argv[1:] = ["serve"]
    sys.exit(entry.main())
    """
)


def test_the_engine_collects_garbage_once_it_listens(tmp_path: Path) -> None:
    """``polypilot serve`` starts without collections (a dashboard waits for it to listen);
    once it listens they run, and what its start made is frozen."""
    env = engine_env(tmp_path / "state", {"POLYPILOT_CONFIG_DIR": str(tmp_path / "config")})
    done = subprocess.run(
        [sys.executable, "-c", ENGINE_COLLECTS], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    said = done.stdout + done.stderr
    assert "collecting while it starts: False" in said and "frozen once it listens: True" in said, said
