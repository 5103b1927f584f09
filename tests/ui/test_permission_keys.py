"""The permission card's keys work where they are shown, and only the options the agent offered
are offered: a key on a button while the keyboard is in the prompt editor would be typed there
(``Allow once [y]`` typed a "y"), and the footer offered "a Allow & remember" for a request that
had no such option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.widgets.permission_prompt import PermissionPrompt
from tests.ui.helpers import demo_app, engine_of, screen_text, wait_for


def footer_keys(app: PolypilotApp) -> dict[str, str]:
    """The keys the footer offers now, with their words (what the user reads there)."""
    return {
        binding.key: binding.description
        for _node, binding, enabled, _tooltip in app.screen.active_bindings.values()
        if binding.show and enabled
    }


async def asking(pilot: Pilot[Any], app: PolypilotApp, options: list[tuple[str, str, str]]) -> PermissionPrompt:
    """The session on screen runs a turn and asks a permission with ``options`` (id, name, kind)."""
    await wait_for(pilot, lambda: app.selected == "s1")
    manager = engine_of(app).manager  # type: ignore[attr-defined]
    await manager.send("s1", "!hang")
    await wait_for(pilot, lambda: manager.view("s1").status.busy, what="the turn")
    event = {
        "requestId": "r1",
        "title": "Run bash: ls",
        "kind": "execute",
        "options": [{"optionId": oid, "name": name, "kind": kind} for oid, name, kind in options],
    }
    manager.apply("s1", AgentEvent(EventType.PERMISSION_REQUESTED, event))
    prompt = app.pane.permission
    await wait_for(pilot, lambda: len(prompt.buttons) == len(options), what="the card")
    return prompt


async def test_keys_are_shown_on_the_card_only_while_they_answer(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        prompt = await asking(
            pilot,
            app,
            [
                ("ok", "Allow once", "allow_once"),
                ("ever", "Allow always", "allow_always"),
                ("no", "Reject", "reject_once"),
            ],
        )
        await wait_for(pilot, lambda: app.pane.editor.has_focus, what="the keyboard in the prompt")
        assert [str(b.label) for b in prompt.buttons] == ["Allow once", "Allow always", "Reject"]
        assert prompt.border_subtitle == "ctrl+g to answer by key" and "[y]" not in screen_text(app)
        await pilot.press("y")  # here it is text, and the card never said otherwise
        assert app.pane.editor.text == "y" and engine_of(app).manager.view("s1").pending_permission is not None  # type: ignore[attr-defined]
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: prompt.has_focus_within, what="the keyboard on the card")
        assert [str(b.label) for b in prompt.buttons] == ["Allow once [y]", "Allow always [a]", "Reject [n]"]
        await pilot.pause()
        shown = screen_text(app)  # drawn whole: a button keeps the width of its words without the key
        assert all(label in shown for label in ("Allow once [y]", "Allow always [a]", "Reject [n]")), shown
        assert "Esc back to the prompt" in str(prompt.border_subtitle)
        assert {"y": "Allow once", "a": "Allow & remember", "n": "Reject"}.items() <= footer_keys(app).items()
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.pane.editor.has_focus, what="back in the prompt")
        assert [str(b.label) for b in prompt.buttons] == ["Allow once", "Allow always", "Reject"]


async def test_only_the_options_offered_have_keys_and_others_do_nothing(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        prompt = await asking(pilot, app, [("ok", "Allow", "allow_once"), ("never", "Reject always", "reject_always")])
        answered: list[str] = []
        original = prompt.post_message
        prompt.post_message = lambda message: (  # type: ignore[method-assign]
            answered.append(message.option_id) if isinstance(message, PermissionPrompt.Answered) else None,
            original(message),
        )[1]
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: prompt.has_focus_within, what="the keyboard on the card")
        assert [str(b.label) for b in prompt.buttons] == ["Allow [y]", "Reject always [N]"]
        offered = footer_keys(app)
        assert "a" not in offered and "Allow & remember" not in screen_text(app)
        assert offered.get("y") == "Allow once" and offered.get("N") == "Reject always"
        await pilot.press("a")  # not offered: nothing happens
        await pilot.pause()
        assert answered == [] and engine_of(app).manager.view("s1").pending_permission is not None  # type: ignore[attr-defined]
        await pilot.press("N")  # shown on the card: it answers
        await wait_for(pilot, lambda: answered == ["never"], what="the answer by N")


async def test_an_option_of_no_known_kind_gets_no_key_and_a_repeated_kind_one_key(tmp_path: Path) -> None:
    app = demo_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        prompt = await asking(
            pilot,
            app,
            [
                ("a1", "Allow for this folder", "allow_once"),
                ("a2", "Allow here only", "allow_once"),
                ("x", "Explain", "other"),
            ],
        )
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: prompt.has_focus_within, what="the keyboard on the card")
        assert [str(b.label) for b in prompt.buttons] == ["Allow for this folder [y]", "Allow here only", "Explain"]
        assert not {"a", "n", "N"} & set(footer_keys(app))
