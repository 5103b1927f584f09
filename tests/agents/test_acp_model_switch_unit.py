"""The ACP model select read from an agent's config options (as codex-acp and opencode send them)."""

from __future__ import annotations

from typing import Any

from acp.schema import NewSessionResponse

from polypilot_tui.agents.acp.model_switch import SessionModels, model_select

MODEL = {
    "id": "model",
    "name": "Model",
    "category": "model",
    "type": "select",
    "currentValue": "mock-model",
    "options": [
        {"value": "mock-model", "name": "mock-model"},
        {"value": "gpt-5.4", "name": "gpt-5.4", "description": "Strong model for everyday coding."},
    ],
}
MODE = {"id": "mode", "name": "Session Mode", "category": "mode", "type": "select", "currentValue": "build",
        "options": [{"value": "build", "name": "build"}]}  # fmt: skip


def models_of(*options: dict[str, Any]) -> SessionModels:
    models = SessionModels(link=None)  # type: ignore[arg-type] # reading needs no connection
    models.update(NewSessionResponse.model_validate({"sessionId": "s", "configOptions": list(options)}).config_options)
    return models


def test_the_model_select_is_found_by_category_and_listed() -> None:
    choices = models_of(MODE, MODEL).choices()
    assert choices.current == "mock-model" and not choices.free_form
    assert [(o.id, o.description) for o in choices.options] == [
        ("mock-model", ""),
        ("gpt-5.4", "Strong model for everyday coding."),
    ]


def test_grouped_options_are_flattened_and_an_id_named_model_is_enough() -> None:
    grouped = {**MODEL, "category": None, "options": [{"group": "mock", "name": "Mock", "options": MODEL["options"]}]}
    assert [o.id for o in models_of(grouped).choices().options] == ["mock-model", "gpt-5.4"]


def test_no_model_select_says_so() -> None:
    choices = models_of(MODE).choices()
    assert choices.options == () and "offers no model choice" in choices.note
    assert model_select(None) is None


def test_a_config_option_update_from_the_wire_moves_the_current_model() -> None:
    models = models_of(MODEL)
    assert models.update_from_wire([MODE, {**MODEL, "currentValue": "gpt-5.4"}]) is True
    assert models.current() == "gpt-5.4"
    assert models.update_from_wire([{**MODEL, "currentValue": "gpt-5.4"}]) is False  # no change
    assert models.update_from_wire([{"type": "select", "id": "model", "options": 3}, "junk"]) is False
    assert models.update_from_wire("junk") is False and models.current() == "gpt-5.4"
