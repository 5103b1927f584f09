"""The scripted model server speaks enough OpenAI for the real agents, and stops by itself."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from tests.support.model_script import ScriptSettings, clean_prompt, keyword, prompt_command
from tests.support.model_server import ModelServer
from tests.support.waiting import until_blocking

BASH = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
RESP_TOOLS = [{"type": "function", "name": "exec_command", "parameters": {}}]


@pytest.fixture
def server() -> ModelServer:
    with ModelServer(slow_chunks=5, slow_interval=0.05) as srv:
        yield srv


def chat(
    server: ModelServer,
    messages: list[dict[str, Any]],
    *,
    stream: bool = True,
    tools: list[dict[str, Any]] | None = None,
    usage: bool = False,
    timeout: float = 5.0,
) -> list[dict]:
    body: dict[str, Any] = {"model": "gpt-4.1", "messages": messages, "stream": stream}
    if tools is not None:
        body["tools"] = tools
    if usage:
        body["stream_options"] = {"include_usage": True}
    response = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=timeout)
    response.raise_for_status()
    if not stream:
        return [response.json()]
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def streamed_text(chunks: list[dict]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def streamed_tool_call(chunks: list[dict]) -> dict[str, str]:
    call = {"id": "", "name": "", "arguments": ""}
    for c in chunks:
        for tc in (c["choices"][0]["delta"].get("tool_calls") or []) if c["choices"] else []:
            assert tc["index"] == 0
            call["id"] = tc.get("id") or call["id"]
            call["name"] = tc.get("function", {}).get("name") or call["name"]
            call["arguments"] += tc.get("function", {}).get("arguments") or ""
    return call


def test_plain_prompt_is_echoed_and_usage_is_sent(server: ModelServer) -> None:
    chunks = chat(
        server, [{"role": "user", "content": "<current_datetime>now</current_datetime>hello"}], tools=BASH, usage=True
    )
    assert streamed_text(chunks) == "echo: hello"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_tool_keyword_calls_the_shell_tool_then_answers_the_result(server: ModelServer) -> None:
    user = {"role": "user", "content": [{"type": "text", "text": "please TOOL now"}]}
    chunks = chat(server, [user], tools=BASH)
    call = streamed_tool_call(chunks)
    assert call["name"] == "bash"
    assert json.loads(call["arguments"])["command"] == "echo hi"
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    follow = [
        user,
        {
            "role": "assistant",
            "tool_calls": [{"id": call["id"], "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": call["id"], "content": "hi\n"},
    ]
    assert streamed_text(chat(server, follow, tools=BASH)) == "done: hi"
    # A later plain prompt is decided from the LAST message only, not from the history.
    later = [*follow, {"role": "assistant", "content": "done: hi"}, {"role": "user", "content": "thanks"}]
    assert streamed_text(chat(server, later, tools=BASH)) == "echo: thanks"


def test_command_override_and_sleeptool(server: ModelServer) -> None:
    call = streamed_tool_call(chat(server, [{"role": "user", "content": "TOOL CMD=`ls -la`"}], tools=BASH))
    assert json.loads(call["arguments"])["command"] == "ls -la"
    call = streamed_tool_call(chat(server, [{"role": "user", "content": "SLEEPTOOL"}], tools=BASH))
    assert json.loads(call["arguments"])["command"] == "sleep 20"


def test_non_streaming_tool_call_and_no_tools_means_plain(server: ModelServer) -> None:
    [obj] = chat(server, [{"role": "user", "content": "TOOL"}], stream=False, tools=BASH)
    assert obj["choices"][0]["finish_reason"] == "tool_calls"
    assert obj["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
    [obj] = chat(server, [{"role": "user", "content": "HANG give me a title"}], stream=False)
    assert obj["choices"][0]["message"]["content"].startswith("echo: ")


def test_slow_streams_spaced_chunks(server: ModelServer) -> None:
    started = time.monotonic()
    chunks = chat(server, [{"role": "user", "content": "go SLOW"}], tools=BASH)
    assert streamed_text(chunks) == "word0 word1 word2 word3 word4 "
    assert time.monotonic() - started >= 0.2


def test_a_held_slow_reply_waits_mid_way_until_released_then_finishes_at_once() -> None:
    with ModelServer(slow_chunks=40, slow_interval=0.2) as srv:  # 8 s of pauses unless released
        srv.hold()
        words: list[str] = []

        def call() -> None:
            body = {"model": "m", "stream": True, "tools": BASH, "messages": [{"role": "user", "content": "SLOW"}]}
            with httpx.stream("POST", f"{srv.base_url}/chat/completions", json=body, timeout=10) as resp:
                for line in resp.iter_lines():
                    if line.startswith("data: {"):
                        chunk = json.loads(line[6:])
                        words.extend(c["delta"].get("content") or "" for c in chunk["choices"])

        thread = threading.Thread(target=call)
        thread.start()
        until_blocking(lambda: "word4 " in words, 5, "the first five words")
        time.sleep(0.6)  # three of its pauses: a reply that was not held would have gone on
        assert "".join(words).split() == [f"word{i}" for i in range(5)]
        released = time.monotonic()
        srv.release()
        thread.join(5)
        assert not thread.is_alive() and time.monotonic() - released < 3
        assert "".join(words).split() == [f"word{i}" for i in range(40)]
        # A later reply streams without its pauses too.
        started = time.monotonic()
        assert len(streamed_text(chat(srv, [{"role": "user", "content": "SLOW"}], tools=BASH)).split()) == 40
        assert time.monotonic() - started < 3


def test_hang_sends_headers_then_stalls_until_stop() -> None:
    srv = ModelServer().start()
    got_headers = threading.Event()
    outcome: dict[str, Any] = {}

    def call() -> None:
        body = {"model": "m", "stream": True, "tools": BASH, "messages": [{"role": "user", "content": "HANG"}]}
        try:
            with httpx.stream("POST", f"{srv.base_url}/chat/completions", json=body, timeout=10) as resp:
                outcome["status"] = resp.status_code
                got_headers.set()
                outcome["body"] = resp.read()
        except httpx.HTTPError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=call)
    thread.start()
    assert got_headers.wait(5)
    time.sleep(0.3)
    assert thread.is_alive()
    srv.stop()
    thread.join(5)
    assert not thread.is_alive() and outcome["status"] == 200


def test_hang_after_tool_hangs_the_follow_up(server: ModelServer) -> None:
    user = {"role": "user", "content": "HANGAFTERTOOL"}
    call = streamed_tool_call(chat(server, [user], tools=BASH))
    follow = [user, {"role": "tool", "tool_call_id": call["id"], "content": "hi"}]
    with pytest.raises(httpx.ReadTimeout):
        chat(server, follow, tools=BASH, timeout=0.5)


def test_responses_api_tool_call_and_text(server: ModelServer) -> None:
    body = {
        "model": "m",
        "stream": True,
        "tools": RESP_TOOLS,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "TOOL"}]}],
    }
    resp = httpx.post(f"{server.base_url}/responses", json=body, timeout=5)
    events = [json.loads(line[6:]) for line in resp.text.splitlines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    item = events[2]["item"]
    assert item["type"] == "function_call" and item["name"] == "exec_command"
    assert json.loads(item["arguments"]) == {"cmd": "echo hi"}
    assert events[3]["response"]["usage"]["total_tokens"] > 0
    body["input"] = [*body["input"], {"type": "function_call_output", "call_id": item["call_id"], "output": "hi"}]
    resp = httpx.post(f"{server.base_url}/responses", json=body, timeout=5)
    deltas = [json.loads(line[6:]) for line in resp.text.splitlines() if line.startswith("data: ")]
    assert "".join(e.get("delta", "") for e in deltas if e["type"] == "response.output_text.delta") == "done: hi"


def test_models_and_recording(server: ModelServer) -> None:
    assert httpx.get(f"{server.base_url}/models").json()["data"][0]["id"] == "gpt-4.1"
    chat(
        server,
        [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "echo: first"},
            {"role": "user", "content": "second"},
        ],
        tools=BASH,
    )
    [req] = server.model_requests()
    assert req.path == "/chat/completions" and "first" in req.text() and req.last.text == "second"
    assert len(server.requests) == 2
    assert server.wait_for_requests(1, timeout=0.1) == [req]


def test_request_cap_and_lifetime_stop_the_server() -> None:
    srv = ModelServer(max_requests=1).start()
    httpx.get(f"{srv.base_url}/models")
    assert httpx.get(f"{srv.base_url}/models").status_code == 503
    until_blocking(lambda: srv.stopped)
    srv.stop()
    short = ModelServer(max_seconds=0.2).start()
    until_blocking(lambda: short.stopped)
    short.stop()


def test_script_helpers() -> None:
    assert keyword("please SLEEPTOOL") == "SLEEPTOOL"
    assert keyword("TOOLS are nice") is None
    assert keyword("HANGAFTERTOOL x") == "HANGAFTERTOOL"
    assert prompt_command("TOOL CMD=<echo x> please") == "echo x"
    assert clean_prompt("<a>x</a> hi") == "hi"
    assert ScriptSettings().cmd == "echo hi"
