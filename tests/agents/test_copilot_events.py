"""SDK events → engine events, permission prompts and decisions (no CLI needed)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from copilot.generated import rpc
from copilot.generated.session_events import SessionEvent

from polypilot_tui.agents.copilot.events import (
    PromptInfo,
    aborted_completion,
    decision_for,
    describe_request,
    event_from_dict,
    event_from_sdk,
    is_unknown,
    permission_fields,
)
from polypilot_tui.infra.redact import REDACTOR


def sdk_event(kind: str, data: dict[str, Any]) -> SessionEvent:
    return SessionEvent.from_dict(
        {"type": kind, "data": data, "id": str(uuid.uuid4()), "timestamp": "2026-01-01T00:00:00Z", "parentId": None}
    )


SHELL_REQUEST = {
    "kind": "shell",
    "canOfferSessionApproval": False,
    "commands": [{"identifier": "echo hi", "readOnly": False}],
    "fullCommandText": "echo hi",
    "hasWriteFileRedirection": False,
    "intention": "Run a shell command",
    "possiblePaths": [],
    "possibleUrls": [],
    "toolCallId": "call_1",
}


def test_known_event_keeps_sdk_type_and_camel_case_data() -> None:
    event = event_from_sdk(
        sdk_event("tool.execution_start", {"toolCallId": "c1", "toolName": "bash", "arguments": {"command": "ls"}})
    )
    assert event.type == "tool.execution_start"
    assert event.data == {"toolCallId": "c1", "toolName": "bash", "arguments": {"command": "ls"}}


def test_complete_event_round_trips_nested_fields() -> None:
    event = event_from_sdk(
        sdk_event(
            "tool.execution_complete",
            {"toolCallId": "c1", "success": False, "error": {"message": "denied", "code": "denied"}},
        )
    )
    assert event.get("success") is False and event.get("error") == {"message": "denied", "code": "denied"}
    idle = event_from_sdk(sdk_event("session.idle", {"aborted": True}))
    assert idle.type == "session.idle" and idle.get("aborted") is True


def test_unknown_type_passes_through_with_raw_name() -> None:
    raw = sdk_event("session.brand_new_thing", {"someField": 1, "nested": {"a": [1]}})
    assert is_unknown(raw)
    event = event_from_sdk(raw)
    assert event.type == "session.brand_new_thing"
    assert event.data == {"someField": 1, "nested": {"a": [1]}}


def test_bulky_model_diagnostics_keep_only_short_scalars() -> None:
    event = event_from_sdk(
        sdk_event(
            "model.messages_snapshot",
            {"kind": "messages_snapshot", "messages": [{"role": "system", "content": "x" * 10_000}], "turn": 2},
        )
    )
    assert event.type == "model.messages_snapshot"
    assert event.data == {"kind": "messages_snapshot", "turn": 2}


class Unserializable:
    type = "weird"
    raw_type = "session.weird"

    def to_dict(self) -> dict[str, Any]:
        raise AssertionError("generated class refuses")


def test_the_cli_system_prompt_is_cut_to_its_head() -> None:
    prompt = "You are GitHub Copilot. " + "x" * 43_000
    blocks = [{"type": "text", "text": prompt}]
    event = event_from_dict(
        {"type": "system.message", "data": {"content": prompt, "role": "system", "contentBlocks": blocks}}
    )
    assert event.get("role") == "system" and event.get("contentChars") == len(prompt)
    assert "contentBlocks" not in event.data
    assert event.text("content").startswith("You are GitHub Copilot.") and len(event.text("content")) < 400
    short = event_from_dict({"type": "system.message", "data": {"content": "Turn ended: cancelled."}})
    assert short.data == {"content": "Turn ended: cancelled."}


def test_serialization_failure_keeps_the_type() -> None:
    event = event_from_sdk(Unserializable())
    assert event.type == "session.weird" and event.data == {}


def test_raw_dict_form() -> None:
    assert event_from_dict({"type": "x.y", "data": None}).data == {}
    assert event_from_dict({"type": "x.y", "data": [1]}).data == {"value": [1]}
    assert event_from_dict({"data": {}}).type == "unknown"


def test_permission_requested_gets_the_engine_fields() -> None:
    event = event_from_sdk(sdk_event("permission.requested", {"requestId": "r1", "permissionRequest": SHELL_REQUEST}))
    data, info = permission_fields(event.data)
    assert data["requestId"] == "r1" and data["toolCallId"] == "call_1"
    assert data["kind"] == "shell" and data["title"] == "Run a shell command" and data["detail"] == "echo hi"
    assert [o["optionId"] for o in data["options"]] == ["allow_once", "reject_once"]  # the CLI offers no session one
    assert data["permissionRequest"]["fullCommandText"] == "echo hi"  # the SDK payload is kept
    assert info == PromptInfo("r1", "shell", "call_1", data["permissionRequest"])


@pytest.mark.parametrize(
    ("kind", "request_fields", "label"),
    [
        ("shell", {"commandIdentifiers": ["echo hi"]}, "Allow “echo hi” for this session"),
        ("write", {"fileName": "a.txt"}, "Allow all file writes for this session"),
        ("url", {"url": "https://docs.example.org/x"}, "Allow requests to docs.example.org for this session"),
        ("mcp", {"serverName": "gh", "toolName": "search"}, "Allow gh/search for this session"),
        ("shell", {"commandIdentifiers": ["echo hi"], "canOfferSessionApproval": False}, None),
        ("shell", {}, None),  # nothing to scope a session approval to
        ("custom-tool", {}, None),
    ],
)
def test_the_session_option_says_what_it_covers_or_is_not_offered(
    kind: str, request_fields: dict[str, Any], label: str | None
) -> None:
    data, _ = permission_fields({"requestId": "r1", "permissionRequest": {"kind": kind, **request_fields}})
    names = {o["kind"]: o["name"] for o in data["options"]}
    assert names.get("allow_always") == label
    assert names["allow_once"] == "Allow once" and names["reject_once"] == "Reject"


def test_pending_request_shape_is_understood_too() -> None:
    item = {
        "requestId": "r2",
        "request": {
            "kind": "commands",
            "commandIdentifiers": ["ls -la"],
            "fullCommandText": "ls -la",
            "intention": "List",
            "toolCallId": "c9",
            "canOfferSessionApproval": False,
        },
    }
    data, info = permission_fields(item)
    assert (data["kind"], data["detail"], data["toolCallId"]) == ("shell", "ls -la", "c9")
    assert info is not None and info.kind == "shell"


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ({"kind": "write", "fileName": "a.py", "diff": "+x", "intention": ""}, ("write", "Write a.py", "a.py\n+x")),
        ({"kind": "read", "path": "/etc/hosts", "intention": "Read it"}, ("read", "Read it", "/etc/hosts")),
        ({"kind": "url", "url": "https://x.test/a", "intention": ""}, ("url", "Fetch a URL", "https://x.test/a")),
        (
            {"kind": "mcp", "serverName": "gh", "toolName": "issue", "toolTitle": "", "args": {"n": 1}},
            ("mcp", "gh/issue", '{"n": 1}'),
        ),
        ({"kind": "custom-tool", "toolName": "deploy", "args": None}, ("custom-tool", "Run tool deploy", "")),
    ],
)
def test_describe_other_kinds(request_: dict[str, Any], expected: tuple[str, str, str]) -> None:
    assert describe_request(request_) == expected


def test_no_request_id_means_nothing_to_remember() -> None:
    _, info = permission_fields({"permissionRequest": SHELL_REQUEST})
    assert info is None


def test_decisions_use_the_sdk_classes() -> None:
    info = PromptInfo("r1", "shell", "c1", SHELL_REQUEST)
    assert isinstance(decision_for("allow_once", info), rpc.PermissionDecisionApproveOnce)
    assert isinstance(decision_for("reject_once", info), rpc.PermissionDecisionReject)
    assert isinstance(decision_for("cancelled", None), rpc.PermissionDecisionReject)
    always = decision_for("allow_always", info)
    assert isinstance(always, rpc.PermissionDecisionApproveForSession)
    assert always.to_dict() == {
        "kind": "approve-for-session",
        "approval": {"commandIdentifiers": ["echo hi"], "kind": "commands"},
    }
    # Without a scope we can name, "always" degrades to "once" rather than widening.
    assert isinstance(decision_for("allow_always", None), rpc.PermissionDecisionApproveOnce)
    url = decision_for("allow_always", PromptInfo("r", "url", "", {"kind": "url", "url": "https://a.test/x"}))
    assert url.to_dict() == {"kind": "approve-for-session", "domain": "a.test"}
    with pytest.raises(ValueError):
        decision_for("yes please", info)


def test_aborted_completion_shape() -> None:
    event = aborted_completion("c7", "bash")
    assert event.type == "tool.execution_complete"
    assert event.data["success"] is False and event.data["error"]["message"] == "aborted"
    assert event.data["toolName"] == "bash"


def test_a_permission_detail_cut_through_a_secret_keeps_no_piece_of_it() -> None:
    token = "ghp_" + "Ab3dEf6hIj9kLm2nOp5q" * 2
    command = "x" * 3990 + f" echo {token}"  # the detail is cut at 4,000 characters, inside the token
    data, _ = permission_fields({"requestId": "r1", "permissionRequest": {**SHELL_REQUEST, "fullCommandText": command}})
    assert data["detail"].endswith("…")
    assert "ghp_A" not in REDACTOR.text(data["detail"])
