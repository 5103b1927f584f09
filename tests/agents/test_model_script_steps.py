"""The scripted model calls tools step by step (``STEPS=``): one call per request, then the results."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.support.model_script import (
    LastMessage,
    Reply,
    ScriptSettings,
    Turn,
    chat_turn,
    plan_reply,
    responses_turn,
    tool_named,
)
from tests.support.model_server import ModelServer

STEPS = [
    {"tool": "start_worker", "args": {"agent": "demo", "prompt": "one"}},
    {"tool": "wait_workers", "args": {}},
    {"tool": "read_reply", "args": {"worker": "{{0.worker}}", "note": "after {{1}}"}},
]
PROMPT = "orchestrate please STEPS=" + json.dumps(STEPS)
COPILOT_TOOLS = ["bash", "view", "polypilot-list_workers", "polypilot-start_worker", "polypilot-wait_workers"]
COPILOT_TOOLS.append("polypilot-read_reply")
OPENCODE_TOOLS = ["bash", "read", "polypilot_start_worker", "polypilot_wait_workers", "polypilot_read_reply"]


def chat(*results: str, prompt: str = PROMPT) -> dict[str, Any]:
    """A Chat Completions body: system, a wrapped user message, then each result after its call."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "you are an agent"},
        {"role": "user", "content": "earlier turn"},
        {"role": "tool", "tool_call_id": "old", "content": "an earlier turn's result"},
        {"role": "user", "content": f"<current_datetime>now</current_datetime>\n{prompt}"},
    ]
    for i, result in enumerate(results):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "x", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": [{"type": "text", "text": result}]})
    return {"messages": messages}


def plan(turn: Turn, tools: list[str]) -> Reply:
    """The reply to a request whose current turn is ``turn``."""
    last = LastMessage("tool", turn.results[-1]) if turn.results else LastMessage("user", turn.prompt)
    return plan_reply(last, tools, ScriptSettings(), 7, turn)


def test_the_turn_is_the_last_user_message_and_the_results_since() -> None:
    assert chat_turn(chat()) == Turn(PROMPT, ())
    assert chat_turn(chat("r0", "r1")) == Turn(PROMPT, ("r0", "r1"))
    responses = {
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "earlier"}]},
            {"type": "function_call_output", "call_id": "old", "output": "old result"},
            {"role": "user", "content": [{"type": "input_text", "text": PROMPT}]},
            {"type": "function_call", "call_id": "c0", "name": "x", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c0", "output": "r0"},
        ]
    }
    assert responses_turn(responses) == Turn(PROMPT, ("r0",))


def test_tools_are_matched_by_the_suffix_each_agent_names_them_with() -> None:
    assert tool_named("start_worker", COPILOT_TOOLS) == "polypilot-start_worker"
    assert tool_named("start_worker", OPENCODE_TOOLS) == "polypilot_start_worker"
    assert tool_named("start_worker", ["start_worker", "x_start_worker"]) == "start_worker"
    assert tool_named("art_worker", OPENCODE_TOOLS) is None, "a suffix is whole name parts"
    assert tool_named("list_workers", OPENCODE_TOOLS) is None


def test_each_step_is_played_when_the_results_before_it_came_then_the_results_are_the_answer() -> None:
    started = json.dumps({"worker": "w-42", "state": "working"})
    first = plan(chat_turn(chat()), COPILOT_TOOLS)
    assert (first.kind, first.tool_name) == ("tool", "polypilot-start_worker")
    assert json.loads(first.arguments) == {"agent": "demo", "prompt": "one"}
    second = plan(chat_turn(chat(started)), OPENCODE_TOOLS)
    assert (second.tool_name, json.loads(second.arguments)) == ("polypilot_wait_workers", {})
    third = plan(chat_turn(chat(started, "all done")), OPENCODE_TOOLS)
    assert third.tool_name == "polypilot_read_reply"
    assert json.loads(third.arguments) == {"worker": "w-42", "note": "after all done"}
    assert third.call_id.endswith("step2")
    answer = plan(chat_turn(chat(started, "all done", "Worker w-42: echo: one")), OPENCODE_TOOLS)
    assert (answer.kind, answer.text) == ("text", f"{started}\nall done\nWorker w-42: echo: one")


def test_a_step_whose_tool_is_not_offered_or_bad_steps_are_said_not_guessed() -> None:
    missing = plan(chat_turn(chat()), ["bash", "view"])
    assert (
        missing.kind == "text" and "no tool named like 'start_worker' was offered (offered: bash, view)" in missing.text
    )
    broken = plan(chat_turn(chat(prompt="go STEPS=[{not json]")), COPILOT_TOOLS)
    assert broken.kind == "text" and broken.text.startswith("STEPS is not a JSON list")
    shapeless = plan(chat_turn(chat(prompt='go STEPS=["start_worker"]')), COPILOT_TOOLS)
    assert shapeless.kind == "text" and "must be a list of" in shapeless.text
    plain = plan(chat_turn(chat(prompt="just TOOL")), COPILOT_TOOLS)
    assert (plain.kind, plain.tool_name) == ("tool", "bash"), "without STEPS the script is as before"


def test_the_server_plays_the_steps_over_http() -> None:
    with ModelServer() as server:
        url = f"{server.base_url}/chat/completions"
        tools = [{"type": "function", "function": {"name": name, "parameters": {}}} for name in COPILOT_TOOLS]
        first = httpx.post(url, json={**chat(), "tools": tools}, timeout=10).json()
        call = first["choices"][0]["message"]["tool_calls"][0]["function"]
        assert call["name"] == "polypilot-start_worker"
        body = {**chat('{"worker": "w1"}', "waited", "the reply"), "tools": tools}
        last = httpx.post(url, json=body, timeout=10).json()
        assert last["choices"][0]["message"]["content"] == '{"worker": "w1"}\nwaited\nthe reply'
