"""The dashboard over several machines (issue 26): Local and two hosts, each a real engine served
on a socket of its own, grouped by the real FleetEngine (the ssh side is tests/e2e/test_fleet.py's).

A host that stops answering is what the fleet makes of a lost link: its state set stale
(tests/support/fleet.py), its rows kept as last seen.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import Input, OptionList

from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.hosts import HostState
from polypilot_tui.engine.api import EngineError
from polypilot_tui.ui.screens.fan_out import FanOutScreen
from polypilot_tui.ui.screens.host_picker import HostPickerScreen
from polypilot_tui.ui.screens.new_session import NewSessionScreen
from polypilot_tui.ui.screens.rename import RenameScreen
from polypilot_tui.ui.ui_state import load_ui_state
from polypilot_tui.ui.welcome import ASK_AGAIN
from tests.snapshots.fleet_scenarios import FleetDriver, fleet_app, utc  # noqa: F401 - utc: the fixture
from tests.ui.helpers import notifications, wait_for
from tests.ui.test_first_start import chat_says

HOSTS = {"dev": ("demo", "devonly"), "ci": ("demo",)}
"""Two hosts; dev has an agent neither Local nor ci has."""

pytestmark = pytest.mark.usefixtures("utc")  # a stale host's "since HH:MM" in UTC


async def test_sessions_of_two_hosts_are_grouped_and_keys_and_alerts_cross_hosts(tmp_path: Path) -> None:
    rig = fleet_app(tmp_path, HOSTS, served=True)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        d = FleetDriver(pilot, rig)
        await d.settle()
        dev = await d.on("dev").add("dev work")
        quiet = await d.on("ci").add("ci quiet")
        asks = await d.add("ci asks")
        await d.send(asks, "deploy")
        d.turn_start(asks)
        d.ask_permission(asks, None, "Deploy to staging?")
        await d.settle()

        rows = rig.app.sidebar.session_list
        assert rows.session_ids == ["s1", dev, quiet, asks]  # Local first, then the hosts in order
        tops = [top.strip() for top, _ in rows.rendered_rows()]
        assert tops[0] == "● Local · this machine" and tops[2] == "● dev · live" and tops[4] == "● ci · live"
        assert rows.rendered_rows()[4][1].strip().startswith("2 sessions · 1 needs you · 1 b")
        assert "4 sessions · 1 needs you · 3 machines" in rig.app.dashboard.sub_title
        # The alert names the host the session runs on.
        assert any(line.startswith("ci · ci asks needs permission") for line in notifications(rig.app))

        # The highlight steps over a host's header, both ways.
        rows.focus()
        await wait_for(pilot, lambda: rows.has_focus)
        await pilot.press("down")
        await wait_for(pilot, lambda: rig.app.selected == dev, what="down: Local's last -> dev's first")
        await pilot.press("down", "up")
        await wait_for(
            pilot, lambda: rig.app.selected == dev and rows.highlighted_id == dev, what="back over ci's header"
        )
        await pilot.press("up", "up")
        await wait_for(pilot, lambda: rig.app.selected == "s1", what="the top: stays on Local's first")

        # ctrl+g finds the session that waits for the user on another host.
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: rig.app.selected == asks, what="ctrl+g to ci's session")

        # A verb on it goes to ci's engine (the fleet routes by session id); the header names ci.
        assert str(rig.app.pane.header.render()).startswith("ci asks · on ci · demo")
        await pilot.press("escape", "f4")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, RenameScreen), what="rename")
        await pilot.press(*"renamed", "enter")  # the name is selected: typing replaces it
        await wait_for(pilot, lambda: rig.engines["ci"].view(asks).name == "renamed", what="renamed on ci")

        # ci's turn runs on in ci's engine whatever is chosen: ctrl+q asks nothing (Local has no turn).
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: rig.app.return_code == 0, what="quit without asking")


async def test_a_stale_host_keeps_its_rows_and_keys_on_them_say_why_at_once(tmp_path: Path) -> None:
    rig = fleet_app(tmp_path, HOSTS, served=True)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        d = FleetDriver(pilot, rig)
        await d.settle()
        sid = await d.on("ci").add("ci work")
        rig.app.select(sid)
        await d.settle()
        await d.clock.advance(90)
        rig.members["ci"].set_state(HostState.STALE, "ssh: Connection reset by peer")
        rows = rig.app.sidebar.session_list
        await wait_for(pilot, lambda: (entry := rows.entry(sid)) is not None and entry.stale, what="ci's row stale")
        header = rows.rendered_rows()[3]  # Local, s1, dev (no sessions), ci
        assert header[0].strip() == "◑ ci · stale since 00:01"
        assert header[1].strip().startswith("1 session · last seen 1m ago")
        await wait_for(
            pilot, lambda: str(rig.app.pane.header.render()).startswith("ci work · on ci (stale since 00:01)")
        )

        # A prompt is kept in the box, nothing goes out, and the reason is said.
        editor = rig.app.pane.editor
        editor.focus()
        await pilot.press(*"deploy", "enter")
        await wait_for(pilot, lambda: any("ci is stale" in n for n in notifications(rig.app)), what="said why")
        assert editor.text == "deploy"
        assert rig.engines["ci"].view(sid).turns == 0 and not rig.engines["ci"].view(sid).status.busy
        # F2 says the whole reason; F4 (rename) opens nothing.
        rig.app.clear_notifications()
        await pilot.press("f2")
        await wait_for(pilot, lambda: any("Connection reset by peer" in n for n in notifications(rig.app)))
        await pilot.press("f4")
        await pilot.pause()
        assert not isinstance(rig.app.screen, RenameScreen)

        # Live again: the rows are current and the prompt goes to ci's engine.
        rig.members["ci"].set_state(HostState.LIVE)
        await wait_for(pilot, lambda: not rows.entry(sid).stale, what="ci's row live again")
        await wait_for(pilot, lambda: str(rig.app.pane.header.render()).startswith("ci work · on ci · demo"))
        editor.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: rig.engines["ci"].view(sid).turns + rig.engines["ci"].view(sid).status.busy > 0)

        # Stale again: a broadcast reaches Local's marked session; ci's is refused here, keeps the text.
        rig.members["ci"].set_state(HostState.STALE, "ssh: Connection reset by peer")
        await wait_for(pilot, lambda: rows.entry(sid).stale, what="ci's row stale again")
        for marked in ("s1", sid):
            rig.app.select(marked)
            await d.settle()
            await pilot.press("ctrl+t")
        editor.focus()
        await pilot.press(*"status?", "enter")
        local = rig.engines[""]
        await wait_for(
            pilot,
            lambda: [i.text for i in local.history("s1") if i.kind is ItemKind.USER] == ["status?"],
            what="Local's s1 took it",
        )
        await wait_for(pilot, lambda: rig.app.pane.drafts().get(sid) == "status?", what="ci's draft keeps it")
        # Told as sent to one of two (never "not sent": s1 has it), and only ci stays marked.
        assert any(
            n.startswith("Not sent to 1 session: Sent to 1 of 2") and "ci is stale" in n for n in notifications(rig.app)
        )
        assert set(rig.app.dashboard.marks.ids) == {sid}


async def test_a_new_session_on_a_host_asks_that_hosts_engine(tmp_path: Path) -> None:
    rig = fleet_app(tmp_path, HOSTS, served=True)
    async with rig.app.run_test(size=(120, 44)) as pilot:
        d = FleetDriver(pilot, rig)
        await d.settle()
        rig.members["ci"].set_state(HostState.STALE, "ssh: Connection timed out")
        await d.settle()
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, HostPickerScreen), what="the host picker")
        picker = rig.app.screen
        options = [picker.query_one("#host-list").get_option_at_index(i) for i in range(3)]
        assert [o.disabled for o in options] == [False, False, True]  # ci does not answer
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, NewSessionScreen), what="the dialog on dev")
        dialog = rig.app.screen
        assert str(dialog.query_one("#new-session-title").render()) == "New session on dev"
        agents = dialog.query_one("#agent-list")
        assert [agents.get_option_at_index(i).id for i in range(agents.option_count)] == ["demo", "devonly"]
        assert dialog.query_one("#folder").value == "~"  # dev's home, not this machine's folder
        await wait_for(pilot, lambda: "~" in rig.engines["dev"].folders_asked, what="dev looked at its folder")
        suggester = dialog.query_one("#folder", Input).suggester
        assert suggester is not None and await suggester.get_suggestion("~/pro") == "~/projects/"  # dev's folders
        agents.highlighted = 1
        agents.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: rig.engines["dev"].ids() == ["d1"], what="the session made on dev")
        assert rig.engines["dev"].view("d1").agent == "devonly"
        assert rig.engines[""].folders_asked == [] and rig.engines["ci"].folders_asked == []
        await wait_for(pilot, lambda: rig.app.selected == "d1", what="the new session on screen")
        assert rig.app.sidebar.session_list.session_ids == ["s1", "d1"]

        # ctrl+f too: the picker starts on the machine of the session on screen (dev).
        asked = len(rig.engines["dev"].folders_asked)
        await pilot.press("ctrl+f")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, HostPickerScreen), what="the fan-out's host picker")
        assert str(rig.app.screen.query_one("#host-picker-title").render()) == "Fan out on…"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(rig.app.screen, FanOutScreen), what="the fan-out dialog on dev")
        fan_out = rig.app.screen
        listed = fan_out.query_one("#agent-list", OptionList)
        assert [listed.get_option_at_index(i).id for i in range(listed.option_count)] == ["demo", "devonly"]
        assert fan_out.query_one("#folder", Input).value == "~"
        await wait_for(pilot, lambda: len(rig.engines["dev"].folders_asked) > asked, what="dev looked at its folder")
        assert rig.engines[""].folders_asked == []


async def test_a_draft_for_a_hosts_session_waits_for_its_host_across_a_restart(tmp_path: Path) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "again").mkdir()
    first = fleet_app(tmp_path / "first", HOSTS, served=True)
    async with first.app.run_test(size=(120, 40)) as pilot:
        d = FleetDriver(pilot, first)
        await d.settle()
        sid = await d.on("dev").add("dev work")
        first.app.select(sid)
        await d.settle()
        first.app.pane.editor.focus()
        await pilot.press(*"half a thought")
        await wait_for(pilot, lambda: first.app.pane.drafts().get(sid) == "half a thought")
    # Next start: dev attaches after the dashboard shows Local's sessions, and it does not answer
    # for a while; the draft is neither dropped nor saved away meanwhile.
    again = fleet_app(tmp_path / "again", HOSTS, served=True)
    shutil.copytree(tmp_path / "first" / "local", tmp_path / "again" / "local", dirs_exist_ok=True)
    async with again.app.run_test(size=(120, 40)) as pilot:
        d = FleetDriver(pilot, again)
        await d.settle()
        assert sid not in again.fleet.ids()
        again.app.dashboard._save_ui_state()  # noqa: SLF001 - the save a heartbeat makes
        saved, problem = load_ui_state(tmp_path / "again" / "local")
        assert saved.drafts.get(sid) == "half a thought" and not problem
        await d.on("dev").add("dev work")  # dev brings its session back (same id)
        again.app.select(sid)
        await wait_for(pilot, lambda: again.app.pane.editor.text == "half a thought", what="the draft given back")


@pytest.mark.expect_errors(r"engine", strict=False, reason="ci's engine stopped: its client says so, as it should")
async def test_a_host_whose_engine_stops_is_marked_and_the_others_keep_answering(tmp_path: Path) -> None:
    rig = fleet_app(tmp_path, HOSTS, served=True, pinged=True)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        d = FleetDriver(pilot, rig)
        await d.settle()
        dev = await d.on("dev").add("dev work")
        ci = await d.on("ci").add("ci work")
        await rig.served["ci"].close()  # ci's engine stops answering
        rows = rig.app.sidebar.session_list
        await wait_for(pilot, lambda: (entry := rows.entry(ci)) is not None and entry.stale, what="ci marked stale")
        assert rows.rendered_rows()[4][0].strip().startswith("◑ ci · stale since")  # Local, s1, dev, d1, ci
        # ci's row stays; a key on it answers at once; dev and Local go on.
        rig.app.select(ci)
        await d.settle()
        await pilot.press("f4")
        await wait_for(pilot, lambda: any("ci is stale" in n for n in notifications(rig.app)), what="F4 said why")
        rig.app.select(dev)
        await wait_for(pilot, lambda: rig.app.pane.session_id == dev)
        rig.app.pane.editor.focus()
        await pilot.press(*"still here?", "enter")
        dev_engine = rig.engines["dev"]
        await wait_for(
            pilot, lambda: [i.text for i in dev_engine.history(dev) if i.kind is ItemKind.USER] == ["still here?"]
        )


async def test_the_highlight_never_rests_on_a_header(tmp_path: Path) -> None:
    rig = fleet_app(tmp_path, {"dev": ("demo",)}, unreachable="build")  # in process: no socket needed
    async with rig.app.run_test(size=(120, 30)) as pilot:
        d = FleetDriver(pilot, rig)
        await d.settle()
        rows = rig.app.sidebar.session_list
        await wait_for(pilot, lambda: len(rows.rendered_rows()) == 4, what="Local, s1, dev, build")
        rows.focus()
        for key in ("end", "pagedown", "down", "home", "pageup", "up"):  # dev and build list no session
            await pilot.press(key)
            await pilot.pause()
            assert rows.highlighted_id == "s1" == rig.app.selected, key
        await pilot.click(rows, offset=(4, 4))  # on dev's header: read, not chosen
        await pilot.pause()
        assert rows.highlighted_id == "s1"


async def test_a_hosts_demo_session_welcomes_with_that_hosts_agents_not_locals(tmp_path: Path) -> None:
    rig = fleet_app(tmp_path, HOSTS, served=True)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        d = FleetDriver(pilot, rig)
        await d.settle()
        # devonly is a demo agent on dev that Local does not know: dev's own list decides.
        sid = await d.on("dev").add("dev demo", agent="devonly")
        rig.app.select(sid)
        await wait_for(pilot, lambda: "ready on dev" in chat_says(rig.app), what="dev's demo welcome")
        said = chat_says(rig.app)
        assert "built-in demo agent" in said and "No agent is ready on dev yet." in said
        assert "this machine" not in said
        rig.app.select("s1")  # Local's demo still speaks of this machine
        await wait_for(pilot, lambda: "No agent is ready on this machine" in chat_says(rig.app), what="Local's")


async def test_a_session_id_a_host_should_never_send_is_not_listed_and_the_dashboard_lives(tmp_path: Path) -> None:
    # A host's engine is not trusted: an id with a terminal escape, a blank or a path (once a
    # widget id Textual refused, which ended the dashboard) is told and left out, the rest shown.
    rig = fleet_app(tmp_path, {"dev": ("demo",)}, served=True)
    bad = "x\x1b]52;c;aGk=\x07"  # OSC 52: would set the clipboard (more shapes: test_fleet_engine.py)
    async with rig.app.run_test(size=(120, 40)) as pilot:
        d = FleetDriver(pilot, rig)
        await d.settle()
        rig.engines["dev"].manager.add_session("demo", name="evil", session_id=bad)  # never listed: no settle
        fine = rig.engines["dev"].manager.add_session("demo", name="fine")
        await wait_for(pilot, lambda: fine in rig.app.sidebar.session_list.session_ids, what="dev's good session")
        rig.app.select(fine)
        await pilot.pause(0.2)
        assert rig.app.sidebar.session_list.session_ids == ["s1", fine] and bad not in rig.fleet.ids()
        assert any("dev: The engine listed a session whose id" in line for line in notifications(rig.app))
        assert rig.app.return_code is None and str(rig.app.pane.header.render()).startswith("fine · on dev")


async def test_a_host_that_fails_to_say_its_agents_is_not_asked_at_every_redraw(tmp_path: Path) -> None:
    # Once the lookup forgot it had asked: each redraw started another remote call, a log line
    # and a full sidebar redraw, at round-trip speed. Asked once; again after ASK_AGAIN.
    rig = fleet_app(tmp_path, HOSTS)
    asked: list[float] = []

    async def refuse(request: object) -> tuple[()]:
        asked.append(rig.clock.now())
        raise EngineError("dev: the link dropped")

    rig.engines["dev"].agents = refuse  # type: ignore[method-assign]
    async with rig.app.run_test(size=(120, 40)) as pilot:
        d = FleetDriver(pilot, rig)
        await d.settle()
        sid = await d.on("dev").add("dev demo")
        rig.app.select(sid)
        await wait_for(pilot, lambda: len(asked) >= 1, what="dev asked for its agents")
        for n in range(20):  # redraws: each one once asked again
            d.on("dev").say(sid, f"line {n}")
            await d.settle()
        assert len(asked) == 1
        await d.advance(ASK_AGAIN + 1)
        d.say(sid, "after the retry time")
        await d.settle()
        await wait_for(pilot, lambda: len(asked) == 2, what="dev asked again after its retry time")
