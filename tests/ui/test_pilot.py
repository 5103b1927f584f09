"""Pilot tests against the real demo agent: drive the keys, assert what the user would see."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.view import SessionStatus
from polypilot_tui.ui.formatting import UNREAD_MARK
from polypilot_tui.ui.screens.new_session import NewSessionScreen
from polypilot_tui.ui.widgets.assistant_message import AssistantMessage
from polypilot_tui.ui.widgets.queue_panel import QueuedPrompt
from polypilot_tui.ui.widgets.user_message import UserMessage
from tests.ui.helpers import demo_app, engine_of, keys_at_once, notifications, wait_for, widget_lines

IN_PROCESS_TOO = True
"""Every key walked with the engine inside the dashboard too (``--in-process``)."""


def replies(app, sid: str) -> list[str]:
    log = app.pane.log_for(sid)
    return [w.text for w in log.query(AssistantMessage)] if log else []


def last_outcome(app, sid: str) -> str:
    return engine_of(app).manager.view(sid).last_outcome


async def send(pilot, text: str) -> None:
    await pilot.press(*text)
    await pilot.press("enter")


async def test_send_a_prompt_and_see_the_reply(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1", what="the default session")
        await send(pilot, "hello there")
        await wait_for(pilot, lambda: last_outcome(app, "s1") == "completed", what="the turn to complete")
        await wait_for(
            pilot, lambda: any("You said: **hello there**" in r for r in replies(app, "s1")), what="the reply on screen"
        )
        log = app.pane.log_for("s1")
        assert [str(w.render()) for w in log.query(UserMessage)] == ["hello there"]
        assert app.pane.editor.text == ""
        assert "Idle" in str(app.pane.status.render())


async def test_ctrl_n_creates_a_session_and_selects_it(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen), what="the agent picker")
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: engine_of(app).manager.ids() == ["s1", "s2"] and app.selected == "s2",
            what="a second session, selected",
        )
        await wait_for(pilot, lambda: app.sidebar.session_list.session_ids == ["s1", "s2"], what="two sidebar rows")
        await wait_for(pilot, lambda: engine_of(app).manager.view("s2").status is SessionStatus.IDLE, what="connected")
        await send(pilot, "hi")
        await wait_for(pilot, lambda: last_outcome(app, "s2") == "completed", what="the new session to answer")
        assert engine_of(app).manager.view("s1").turns == 0


async def test_ctrl_n_escape_cancels(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, NewSessionScreen))
        assert engine_of(app).manager.ids() == ["s1"]


async def test_ctrl_x_mid_turn_stops_and_the_session_stays_usable(tmp_path: Path) -> None:
    app = demo_app(tmp_path, speed=4)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "!slow")
        await wait_for(pilot, lambda: "word2" in engine_of(app).manager.streaming_text("s1"), what="streaming")
        await wait_for(pilot, lambda: "word2" in app.pane.log_for("s1").streaming, what="stream on screen")
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status is SessionStatus.STOPPED, what="stopped")
        history = engine_of(app).manager.history("s1")
        kept = [i for i in history if i.kind is ItemKind.ASSISTANT]
        assert kept and kept[-1].interrupted and "word0" in kept[-1].text  # nothing said is lost
        await wait_for(pilot, lambda: "Stopped" in str(app.pane.status.render()))
        await send(pilot, "hello again")
        await wait_for(pilot, lambda: last_outcome(app, "s1") == "completed", what="the next prompt to work")
        await wait_for(pilot, lambda: any("hello again" in r for r in replies(app, "s1")))


async def test_ctrl_r_reconnects_and_keeps_history(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "hello")
        await wait_for(pilot, lambda: last_outcome(app, "s1") == "completed")
        before = engine_of(app).manager.history("s1")
        await pilot.press("ctrl+r")
        await wait_for(
            pilot,
            lambda: any("reconnected" in i.text for i in engine_of(app).manager.history("s1")),
            what="the reconnect note",
        )
        after = engine_of(app).manager.history("s1")
        assert after[: len(before)] == before
        await wait_for(
            pilot,
            lambda: any("reconnected" in str(w.render()) for w in app.pane.log_for("s1").query(Static)),
            what="the note on screen",
        )
        await send(pilot, "hello twice")
        await wait_for(
            pilot, lambda: engine_of(app).manager.view("s1").turns == 2 and last_outcome(app, "s1") == "completed"
        )


async def test_ctrl_up_down_move_the_selection(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        for _ in range(2):
            engine_of(app).manager.add_session("demo")
        await wait_for(pilot, lambda: app.sidebar.session_list.session_ids == ["s1", "s2", "s3"])
        assert app.selected == "s1"
        await pilot.press("ctrl+down")
        await wait_for(pilot, lambda: app.selected == "s2" and app.pane.session_id == "s2")
        await pilot.press("ctrl+down", "ctrl+down")
        await wait_for(pilot, lambda: app.selected == "s1", what="wrap around")
        await pilot.press("ctrl+up")
        await wait_for(pilot, lambda: app.selected == "s3" and app.pane.session_id == "s3")
        await wait_for(pilot, lambda: app.sidebar.highlighted == "s3", what="the row follows")


async def test_attention_jump_goes_to_the_waiting_session_and_answers_by_key(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        sid = engine_of(app).manager.add_session("demo")
        app.select("s1")
        await wait_for(pilot, lambda: engine_of(app).manager.view(sid).status is SessionStatus.IDLE)
        await engine_of(app).manager.send(sid, "write a file")
        await wait_for(
            pilot, lambda: engine_of(app).manager.view(sid).pending_permission is not None, what="the request"
        )
        await wait_for(pilot, lambda: any("needs permission" in n for n in notifications(app)), what="a toast")
        assert app.selected == "s1"  # an alert never moves you
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: app.selected == sid and app.pane.permission.display, what="the jump")
        await wait_for(pilot, lambda: app.pane.permission.has_focus_within, what="the prompt focused")
        await pilot.press("y")
        await wait_for(pilot, lambda: last_outcome(app, sid) == "completed", what="the tool to run")
        await wait_for(pilot, lambda: any("notes.txt" in r and "written" in r for r in replies(app, sid)))
        assert app.pane.editor.has_focus
        await wait_for(pilot, lambda: not app.pane.permission.display)


async def test_unread_finished_session_is_marked_and_reachable_by_ctrl_g(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        sid = engine_of(app).manager.add_session("demo")
        app.select("s1")
        await wait_for(pilot, lambda: engine_of(app).manager.view(sid).status is SessionStatus.IDLE)
        await engine_of(app).manager.send(sid, "hi")
        await wait_for(pilot, lambda: sid in app.dashboard.attention.unread, what="unread mark")
        rows = app.sidebar.session_list

        def unread_mark() -> bool:
            entry, (top, _) = rows.entry(sid), rows.rendered(sid)
            assert entry.unread == top.rstrip().endswith(UNREAD_MARK)  # what is drawn follows the entry
            return entry.unread

        await wait_for(pilot, unread_mark)
        assert sum("finished" in n for n in notifications(app)) == 1
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: app.selected == sid and not unread_mark())
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: any("No other session" in n for n in notifications(app)))
        assert app.selected == sid


async def test_ctrl_g_y_from_another_session_answers_there_and_types_nothing(tmp_path: Path) -> None:
    """From another session, ctrl+g jumps to the one blocked on a permission (before sessions
    that merely failed), and a "y" sent in the same burst is its answer, not prompt text."""
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        failed = engine_of(app).manager.add_session("demo")
        await engine_of(app).manager.send(failed, "!crash-mid-tool")  # needs the user too, and is first in the sidebar
        await wait_for(
            pilot, lambda: app.dashboard.attention.wants_user(engine_of(app).manager.view(failed)), timeout=15
        )
        waiting = engine_of(app).manager.add_session("demo")
        await engine_of(app).manager.send(waiting, "write a file")
        await wait_for(pilot, lambda: engine_of(app).manager.view(waiting).pending_permission is not None)
        await wait_for(pilot, lambda: app.selected == "s1" and app.pane.editor.has_focus)
        keys_at_once(app, "ctrl+g", "y")
        await wait_for(pilot, lambda: last_outcome(app, waiting) == "completed", what="the tool allowed")
        assert app.selected == waiting and app.pane.editor.text == ""
        assert app.pane.drafts().get("s1", "") == "" and app.pane.drafts().get(waiting, "") == ""


async def test_reject_permission_by_click(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "write a file")
        await wait_for(pilot, lambda: len(app.pane.permission.buttons) == 3, what="three options")
        labels = [str(b.label) for b in app.pane.permission.buttons]
        assert labels == ["Allow once", "Allow always", "Reject"]  # no keys: they would type into the prompt
        reject = next(b for b in app.pane.permission.buttons if b.option_id == "reject_once")
        await pilot.pause()
        await pilot.click(reject)
        await wait_for(pilot, lambda: last_outcome(app, "s1") == "completed")
        await wait_for(pilot, lambda: any("did not write" in r for r in replies(app, "s1")))


async def test_a_queue_is_visible_and_stop_holds_it_instead_of_dropping_it(tmp_path: Path) -> None:
    app = demo_app(tmp_path, speed=4)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "!slow")
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status.busy)
        await send(pilot, "next one")
        await send(pilot, "and another")
        panel = app.pane.queue
        await wait_for(pilot, lambda: panel.display and len(panel.query(QueuedPrompt)) == 2, what="the queue shown")
        assert [row.prompt.preview for row in panel.query(QueuedPrompt)] == ["next one", "and another"]
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status is SessionStatus.STOPPED)
        await wait_for(
            pilot,
            lambda: "held" in str(panel.query_one(".queue-title", Static).render()),
            what="the queue held, not dropped",
        )
        assert (
            tuple(q.preview for q in engine_of(app).manager.view("s1").queue) == ("next one", "and another")
            and engine_of(app).manager.view("s1").turns == 1
        )
        # Edit takes the first one back into the editor; "Send in order" sends the other.
        await pilot.click(panel.query(QueuedPrompt).first().query_one(".queued-edit"))
        await wait_for(pilot, lambda: app.pane.editor.text == "next one", what="the prompt back in the editor")
        await wait_for(pilot, lambda: len(panel.query(QueuedPrompt)) == 1)
        await pilot.click(panel.query_one(".queue-send"))
        await wait_for(
            pilot,
            lambda: engine_of(app).manager.view("s1").turns == 2 and not engine_of(app).manager.view("s1").queue,
            timeout=15,
            what="the held prompt sent",
        )
        assert [t.prompt for t in engine_of(app).manager.session("s1").turns] == ["!slow", "and another"]
        await wait_for(pilot, lambda: not panel.display)


async def test_prompt_history_up_down(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "hi")
        await wait_for(pilot, lambda: last_outcome(app, "s1") == "completed")
        await send(pilot, "!help")
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").turns == 2)
        await pilot.press(*"dra")
        await pilot.press("up")
        assert app.pane.editor.text == "!help"
        await pilot.press("up", "up")
        assert app.pane.editor.text == "hi"
        await pilot.press("down", "down")
        assert app.pane.editor.text == "dra"


async def test_bad_theme_file_is_one_notification_not_a_crash(tmp_path: Path) -> None:
    themes = tmp_path / "themes"
    themes.mkdir()
    (themes / "broken.toml").write_text("name = 'broken'\nprimary = 'not-a-colour'\n", encoding="utf-8")
    (themes / "garbage.toml").write_text("this is [not toml", encoding="utf-8")
    from polypilot_tui.ui.theming import BUNDLED_DIR

    app = demo_app(tmp_path / "state", theme_dirs=[BUNDLED_DIR, themes])
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        shown = [n for n in notifications(app) if "Theme file" in n]
        assert len(shown) == 1
        assert "broken.toml" in shown[0] and "garbage.toml" in shown[0]
        assert app.theme == "polypilot-night"


async def test_unknown_theme_falls_back_with_a_notice(tmp_path: Path) -> None:
    app = demo_app(tmp_path, theme="no-such-theme")
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        assert app.theme == "polypilot-night"
        assert any("no-such-theme" in n for n in notifications(app))


async def test_agent_markup_and_escape_sequences_are_shown_literally(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        evil = "[bold red]boom[/] \x1b[2J\x1b]0;pwned\x07ok"
        sid = engine_of(app).manager.add_session("demo", name="[b]nasty[/b]")
        await wait_for(pilot, lambda: engine_of(app).manager.view(sid).status is SessionStatus.IDLE)
        app.select(sid)
        await engine_of(app).manager.send(sid, evil)
        await wait_for(pilot, lambda: last_outcome(app, sid) == "completed")
        await wait_for(pilot, lambda: replies(app, sid))
        user = [str(w.render()) for w in app.pane.log_for(sid).query(UserMessage)]
        assert user == ["[bold red]boom[/] ok"]
        assert "[bold red]boom[/]" in replies(app, sid)[0] and "\x1b" not in replies(app, sid)[0]
        assert "[b]nasty[/b]" in app.sidebar.session_list.rendered(sid)[0]

        def rendered() -> str:  # the reply's Markdown is laid out a refresh after its text is set
            return "\n".join(widget_lines(app.pane.log_for(sid).query(AssistantMessage).first()))

        await wait_for(pilot, lambda: "[bold red]boom[/]" in rendered(), what="the reply's text on screen")
        assert "\x1b" not in rendered()


async def test_keymap_file_remaps_a_binding(tmp_path: Path) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('stop = "ctrl+t"\n', encoding="utf-8")
    app = demo_app(tmp_path, speed=4, keymap_file=keymap)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "!slow")
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status.busy)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status is SessionStatus.STOPPED)


async def test_typing_after_a_click_on_the_sidebar_goes_to_the_prompt_and_never_stops_a_turn(tmp_path: Path) -> None:
    app = demo_app(tmp_path, speed=4)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "!hang")  # a turn that lasts however slowly the keys below arrive
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status.busy)
        rows = app.sidebar.session_list
        await pilot.click(rows, offset=rows.row_offset("s1"))
        await pilot.press(*"yes stop running")  # "s" and "r" once stopped and reconnected from here
        await pilot.pause()
        assert engine_of(app).manager.view("s1").status.busy, "a letter typed after a click must never stop the turn"
        assert app.pane.editor.text == "yes stop running" and app.pane.editor.has_focus
        # Even with the keyboard on the list (tab), letters go to the prompt.
        rows.focus()
        await wait_for(pilot, lambda: rows.has_focus)
        await pilot.press(*" sr")
        assert app.pane.editor.text == "yes stop running sr" and engine_of(app).manager.view("s1").status.busy
        assert not any("reconnected" in i.text for i in engine_of(app).manager.history("s1"))


async def test_command_palette_lists_the_session_actions(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for wanted in ("New session", "Stop session", "Reconnect session", "Jump to attention"):
            assert wanted in titles
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "CommandPalette")
        await pilot.press(*"new session")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen), what="the picker via palette")


async def test_sessions_survive_a_restart_of_the_app(tmp_path: Path) -> None:
    from polypilot_tui.engine.persistence import attach_persistence

    app = demo_app(tmp_path, speed=4, attach=attach_persistence)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "hello there")
        await wait_for(pilot, lambda: last_outcome(app, "s1") == "completed")
        await send(pilot, "!slow")
        await wait_for(pilot, lambda: "word1" in engine_of(app).manager.streaming_text("s1"))
    # quit mid-turn: the next start brings the history back and offers to resend the prompt
    again = demo_app(tmp_path, speed=20, attach=attach_persistence)
    async with again.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: engine_of(again).manager.ids() == ["s1"] and again.selected == "s1")
        await wait_for(pilot, lambda: any("You said: **hello there**" in r for r in replies(again, "s1")))
        await wait_for(pilot, lambda: again.pane.notice.display, what="the resend offer")
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: last_outcome(again, "s1") == "completed", timeout=15)
        # The pane catches up at the next coalesced redraw (at most 50 ms later).
        await wait_for(pilot, lambda: "word59" in replies(again, "s1")[-1], what="the whole reply drawn")


async def test_close_asks_and_ctrl_z_brings_the_session_back_with_history_and_draft(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "hello there")
        await wait_for(pilot, lambda: last_outcome(app, "s1") == "completed")
        sid = engine_of(app).manager.add_session("demo")
        app.select("s1")
        await pilot.press(*"half typed")
        app.dashboard.action_close_session()
        await pilot.press("n")  # no: nothing happens
        await pilot.pause()
        assert "s1" in engine_of(app).manager.ids() and app.pane.editor.text == "half typed"
        app.dashboard.action_close_session()
        await pilot.press("y")
        await wait_for(pilot, lambda: engine_of(app).manager.ids() == [sid] and app.selected == sid, what="closed")
        assert any("ctrl+z brings it back" in n for n in notifications(app))
        await pilot.press("ctrl+z")
        await wait_for(pilot, lambda: app.selected == "s1" and "s1" in engine_of(app).manager.ids(), what="undone")
        assert engine_of(app).manager.ids() == ["s1", sid]  # back where it was in the list, not last
        await wait_for(pilot, lambda: app.pane.editor.text == "half typed", what="the draft back")
        assert [i.text for i in engine_of(app).manager.history("s1")][0] == "hello there"
        await wait_for(pilot, lambda: any("You said: **hello there**" in r for r in replies(app, "s1")))
        # With nothing left to undo, ctrl+z is the editor's own undo again.
        await pilot.press("ctrl+z")
        await pilot.pause()
        assert engine_of(app).manager.ids() == ["s1", sid]  # nothing reopened twice
        await send(pilot, "!help")
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").turns >= 1, what="the reopened session answers")


@pytest.mark.in_process("attached, quitting leaves the engine and its turn running (test_dashboard_attached)")
async def test_quit_with_a_turn_running_asks_and_the_turn_is_offered_for_resending(tmp_path: Path) -> None:
    app = demo_app(tmp_path, speed=1)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "!slow")
        await wait_for(pilot, lambda: engine_of(app).manager.view("s1").status.busy)
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="the question")
        await pilot.press("n")
        await pilot.pause()
        assert app.is_running and engine_of(app).manager.view("s1").status.busy
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen")
        await pilot.press("y")
    session = engine_of(app).manager.session("s1")
    assert session.turn is None and session.interrupted_prompt == "!slow"
    assert session.last_outcome.reason == "interrupted: polypilot stopped during this turn"


async def test_ctrl_g_then_y_in_one_burst_answers_the_permission(tmp_path: Path) -> None:
    """The two keys arrive together (a fast typist, a busy app): "y" must be the answer, not text."""
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "write a file")
        await wait_for(pilot, lambda: len(app.pane.permission.buttons) == 3, what="the prompt")
        keys_at_once(app, "ctrl+g", "y")
        await wait_for(pilot, lambda: last_outcome(app, "s1") == "completed", what="the tool allowed")
        assert app.pane.editor.text == ""
        await wait_for(pilot, lambda: any("written" in r for r in replies(app, "s1")), what="the reply drawn")


async def test_the_queue_panels_clear_drops_every_queued_prompt_and_the_turn_goes_on(tmp_path: Path) -> None:
    # The turn is held open by its permission prompt, not by a slow stream: it stays running
    # for as long as the test needs however loaded the machine, and ends as soon as it is answered.
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1")
        await send(pilot, "write a file")
        await wait_for(pilot, lambda: len(app.pane.permission.buttons) == 3, what="the permission asked")
        assert engine_of(app).manager.view("s1").status.busy
        await send(pilot, "next one")
        await send(pilot, "and another")
        panel = app.pane.queue
        await wait_for(pilot, lambda: len(panel.query(QueuedPrompt)) == 2, what="the queue shown")
        await pilot.click(panel.query_one(".queue-clear"))
        await wait_for(pilot, lambda: not engine_of(app).manager.view("s1").queue, what="the queue cleared")
        assert engine_of(app).manager.view("s1").status.busy  # the running turn goes on
        await wait_for(pilot, lambda: not panel.display, what="the panel gone")
        keys_at_once(app, "ctrl+g", "y")
        await wait_for(pilot, lambda: last_outcome(app, "s1") == "completed", timeout=15, what="the turn allowed on")
        assert [t.prompt for t in engine_of(app).manager.session("s1").turns] == ["write a file"]  # none queued went
        await wait_for(pilot, lambda: any("written" in r for r in replies(app, "s1")), what="the turn's reply drawn")
