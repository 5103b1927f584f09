"""Two dashboards on one engine service, both in windows the user left: the desktop notification
comes from the one whose terminal had the focus last, never from both."""

from __future__ import annotations

import pytest
from textual import events

from polypilot_tui.engine import verbs
from tests.support.engine_service import attached_dashboard, running_engine
from tests.ui.helpers import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SIZE = (140, 40)


class Recorder:
    """A Notifier that keeps the titles it was asked to show."""

    def __init__(self) -> None:
        self.titles: list[str] = []

    async def notify(self, title: str, body: str) -> None:
        self.titles.append(title)


async def test_only_the_last_focused_of_two_blurred_dashboards_notifies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYPILOT_DEMO_SPEED", "20")
    monkeypatch.setenv("POLYPILOT_RECORD", "false")
    async with running_engine() as engine:
        first, second = attached_dashboard(engine.state), attached_dashboard(engine.state)
        first.notifier, second.notifier = Recorder(), Recorder()
        async with first.run_test(size=SIZE) as one, second.run_test(size=SIZE) as two:
            await wait_for(one, lambda: first.selected is not None, what="a session in the first")
            sid = first.selected
            await wait_for(two, lambda: second.engine.ids() == [sid], what="the same session in the second")
            # The user was last in the second terminal, then left both for another window.
            second.post_message(events.AppFocus())
            await wait_for(two, lambda: second.engine.alerts_here() and not first.engine.alerts_here())
            first.post_message(events.AppBlur())
            second.post_message(events.AppBlur())
            await wait_for(one, lambda: not first.app_focus and not second.app_focus, what="both blurred")
            await first.engine.call(verbs.SEND, verbs.Send(sid, "!permission write it"))
            await wait_for(two, lambda: second.notifier.titles[-1:] == [f"{name(second, sid)} needs permission"])
            request = second.engine.view(sid).pending_permission.request_id
            await second.engine.call(verbs.ANSWER_PERMISSION, verbs.AnswerPermission(sid, request, "allow_once"))
            await wait_for(two, lambda: len(second.notifier.titles) == 2, what="the finish notified")
            await wait_for(one, lambda: first.engine.view(sid).turns == 1, what="the turn's end in the first")
            await one.pause(0.3)
            assert second.notifier.titles == [f"{name(second, sid)} needs permission", f"{name(second, sid)} finished"]
            assert first.notifier.titles == []
            await one.press("ctrl+q")
            await two.press("ctrl+q")


def name(app: object, sid: str) -> str:
    return app.engine.view(sid).name  # type: ignore[attr-defined]
