"""Desktop notifications on the real demo agent: only while the terminal is not focused,
once per state, from the same attention rules as the bell and the toast."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual import events

from polypilot_tui.domain.view import SessionStatus
from tests.support.fake_notifier import fake_notifier, runs
from tests.ui.helpers import demo_app, engine_of, notifications, wait_for


class Recorder:
    """A Notifier that keeps what it was asked to show."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def notify(self, title: str, body: str) -> None:
        self.sent.append((title, body))


async def blur(pilot: Any, app: Any, focused: bool = False) -> None:
    """The terminal reports it lost (or got back) the focus."""
    app.post_message(events.AppFocus() if focused else events.AppBlur())
    await wait_for(pilot, lambda: app.app_focus is focused, what="the focus change")


async def permission_then_finish(pilot: Any, app: Any, sid: str) -> None:
    """A turn on ``sid`` that asks for permission, is allowed, and ends."""
    manager = engine_of(app).manager
    await wait_for(pilot, lambda: manager.view(sid).status is SessionStatus.IDLE, what="an idle session")
    turns = manager.view(sid).turns
    await manager.send(sid, "write a file")
    await wait_for(pilot, lambda: manager.view(sid).pending_permission is not None, what="the request")
    await app.dashboard.heartbeat()  # a redraw of the same request must not notify again
    await manager.answer_permission(sid, manager.view(sid).pending_permission.request_id, "allow_once")
    await wait_for(pilot, lambda: manager.view(sid).turns == turns + 1, what="the turn's end")
    await app.dashboard.heartbeat()


async def test_blurred_terminal_notifies_permission_and_finish_once_and_focus_stops_it(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    fake = Recorder()
    app.notifier = fake
    # A toast goes after 5 s of real time, and this test counts them: on a busy machine the
    # first "finished" one went before the second came, and the count never reached two.
    app.NOTIFICATION_TIMEOUT = 3600  # type: ignore[misc]
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1", what="the default session")
        await blur(pilot, app)
        # The session on screen notifies too: nobody is looking at the screen.
        await permission_then_finish(pilot, app, "s1")
        await wait_for(pilot, lambda: len(fake.sent) == 2, what="two notifications")
        (asked, _), (finished, body) = fake.sent
        name = engine_of(app).manager.view("s1").name
        assert asked == f"{name} needs permission" and finished == f"{name} finished" and body == "Its turn is over."
        assert any("needs permission" in n for n in notifications(app))  # the toast is there on return
        # Back in the terminal: the toast rules alone, as before.
        await blur(pilot, app, focused=True)
        other = engine_of(app).manager.add_session("demo")
        await permission_then_finish(pilot, app, other)
        await wait_for(pilot, lambda: sum("finished" in n for n in notifications(app)) == 2, what="the toast")
        await permission_then_finish(pilot, app, "s1")  # on screen and focused: silent everywhere
        await pilot.pause(0.2)
        assert len(fake.sent) == 2


async def test_only_the_last_focused_dashboard_notifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = demo_app(tmp_path)
    fake = Recorder()
    app.notifier = fake
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1", what="the default session")
        await blur(pilot, app)
        # Another dashboard on the same engine had the focus last (tests/service checks alerts_here).
        monkeypatch.setattr(app.engine, "alerts_here", lambda: False)
        await permission_then_finish(pilot, app, "s1")
        monkeypatch.setattr(app.engine, "alerts_here", lambda: True)
        await permission_then_finish(pilot, app, "s1")
        await wait_for(pilot, lambda: len(fake.sent) == 2, what="the second turn's two notifications")
        await pilot.pause(0.2)
        assert [title.split(" ", 1)[1] for title, _ in fake.sent] == ["needs permission", "finished"]


@pytest.mark.parametrize(("mode", "expected"), [("system", 2), ("off", 0)])
async def test_the_setting_picks_the_real_notifier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, expected: int
) -> None:
    exe = fake_notifier(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{exe.parent}:/usr/bin:/bin")
    app = demo_app(tmp_path, notifications=mode)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.selected == "s1", what="the default session")
        await blur(pilot, app)
        await permission_then_finish(pilot, app, "s1")
        await wait_for(pilot, lambda: len(runs(exe)) == expected, what=f"{expected} runs of notify-send")
        await pilot.pause(0.2)
    name = engine_of(app).manager.view("s1").name
    want = [
        ["--app-name=polypilot", "--", f"{name} needs permission"],
        ["--app-name=polypilot", "--", f"{name} finished"],
    ]
    assert [argv[:3] for argv in runs(exe)] == want[:expected]
