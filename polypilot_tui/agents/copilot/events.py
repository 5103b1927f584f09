"""Pure helpers of the Copilot backend: SDK events to engine events, permission prompts.

Nothing here talks to the CLI. :func:`event_from_sdk` turns a ``copilot`` SDK event into an
:class:`AgentEvent` in the ``events.jsonl`` form (SDK type string, camelCase data);
:func:`permission_fields` adds the fields the engine reads from ``permission.requested``;
:func:`decision_for` builds the SDK decision object for one of our option ids.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from polypilot_tui.agents.base import ALLOW_ALWAYS, ALLOW_ONCE, CANCELLED, REJECT_ONCE
from polypilot_tui.agents.copilot.sdk_errors import SHAPE_ERRORS
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.events import AgentEvent
from polypilot_tui.domain.text import clip

log = logging.getLogger(__name__)

_ALLOW_ONCE_OPTION = {"optionId": ALLOW_ONCE, "name": "Allow once", "kind": "allow_once"}
_REJECT_OPTION = {"optionId": REJECT_ONCE, "name": "Reject", "kind": "reject_once"}

#: ``permission.completed`` result kinds, as the CLI itself names them.
RESULT_KINDS: dict[str, str] = {
    ALLOW_ONCE: "approved",
    ALLOW_ALWAYS: "approved-for-session",
    REJECT_ONCE: "denied-interactively-by-user",
    CANCELLED: "denied-interactively-by-user",
}

#: CLI-only diagnostics (``model.messages_snapshot`` carries the whole prompt on every
#: turn): only their short scalar fields are kept, so traces stay small.
_BULKY_PREFIXES = ("model.",)
_SCALAR_MAX = 200
_SYSTEM_PROMPT_KEEP = 300
_DETAIL_MAX = 4000


def event_from_sdk(event: Any) -> AgentEvent:
    """The engine form of one SDK ``SessionEvent`` (never raises)."""
    kind = _type_name(event)
    try:
        data: Any = event.to_dict().get("data")
    except SHAPE_ERRORS:  # a generated class that cannot serialize itself: keep the type
        log.debug("copilot: cannot serialize %s event", kind, exc_info=True)
        data = {}
    return event_from_dict({"type": kind, "data": data})


def event_from_dict(raw: Mapping[str, Any]) -> AgentEvent:
    """The engine form of one raw ``{"type", "data"}`` event (the wire / events.jsonl form)."""
    kind = raw.get("type")
    kind = kind if isinstance(kind, str) and kind else "unknown"
    data = raw.get("data")
    if data is None:
        data = {}
    elif not isinstance(data, dict):
        data = {"value": data}
    if kind.startswith(_BULKY_PREFIXES):
        data = {k: v for k, v in data.items() if _small_scalar(v)}
    elif kind == "system.message":
        data = _trimmed_system_prompt(data)
    return AgentEvent(kind, data)


def _trimmed_system_prompt(data: dict[str, Any]) -> dict[str, Any]:
    """The CLI sends its whole system prompt (~43 KB) as ``system.message`` with every user
    message. The engine does not read it; kept whole it was ~90% of a recording (the 5 MB
    cap reached after ~115 prompts) and of ``polypilot run --json``. Keep its head and size."""
    content = data.get("content")
    if not isinstance(content, str) or len(content) <= _SYSTEM_PROMPT_KEEP:
        return data
    trimmed = {k: v for k, v in data.items() if k != "contentBlocks"}  # the same prompt again, in parts
    return {**trimmed, "content": content[:_SYSTEM_PROMPT_KEEP] + " …", "contentChars": len(content)}


def _type_name(event: Any) -> str:
    raw_type = getattr(event, "raw_type", None)
    if isinstance(raw_type, str) and raw_type:
        return raw_type
    kind = getattr(event, "type", None)
    value = getattr(kind, "value", kind)
    return value if isinstance(value, str) and value else "unknown"


def is_unknown(event: Any) -> bool:
    """True for event types this SDK version does not model (``type=UNKNOWN``)."""
    kind = getattr(event, "type", None)
    return getattr(kind, "value", kind) == "unknown" or bool(getattr(event, "raw_type", None))


def _small_scalar(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= _SCALAR_MAX
    return value is None or isinstance(value, (bool, int, float))


@dataclass(frozen=True)
class PromptInfo:
    """What the backend remembers about one permission request to answer it later."""

    request_id: str
    kind: str
    tool_call_id: str
    request: Mapping[str, Any]


def _request_of(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The request object of a ``permission.requested`` payload or a pending-request item."""
    for key in ("permissionRequest", "promptRequest", "request"):
        value = data.get(key)
        if isinstance(value, Mapping):
            return value
    return {}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def describe_request(request: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, title, detail) of a permission request in either SDK shape."""
    kind = _text(request.get("kind")) or "unknown"
    if kind == "commands":  # the pending-requests shape of a shell prompt
        kind = "shell"
    intention = _text(request.get("intention"))
    if kind == "shell":
        detail = _text(request.get("fullCommandText")) or " ".join(_command_ids(request))
        return kind, intention or "Run a shell command", detail
    if kind == "write":
        name = _text(request.get("fileName"))
        diff = _text(request.get("diff")) or _text(request.get("newFileContents"))
        return kind, intention or f"Write {name}", f"{name}\n{diff}".strip()
    if kind == "read":
        return kind, intention or "Read a file", _text(request.get("path"))
    if kind == "url":
        return kind, intention or "Fetch a URL", _text(request.get("url"))
    if kind == "mcp":
        server, tool = _text(request.get("serverName")), _text(request.get("toolName"))
        title = _text(request.get("toolTitle")) or f"{server}/{tool}"
        return kind, title, _text(request.get("args"))
    if kind == "custom-tool":
        tool = _text(request.get("toolName"))
        return kind, f"Run tool {tool}", _text(request.get("args"))
    if kind == "memory":
        return kind, intention or "Update memory", _text(request.get("fact") or request.get("subject"))
    rest = {k: v for k, v in request.items() if k != "kind"}
    return kind, intention or f"Permission: {kind}", _text(rest)


def _command_ids(request: Mapping[str, Any]) -> list[str]:
    ids = request.get("commandIdentifiers")
    if isinstance(ids, list):
        return [i for i in ids if isinstance(i, str)]
    commands = request.get("commands")
    if isinstance(commands, list):
        return [c["identifier"] for c in commands if isinstance(c, Mapping) and isinstance(c.get("identifier"), str)]
    return []


def permission_fields(data: Mapping[str, Any]) -> tuple[dict[str, Any], PromptInfo | None]:
    """``data`` plus requestId/toolCallId/kind/title/detail/options, and what to remember.

    Works for the SDK's ``permission.requested`` payload and for a ``pending_requests()``
    item (``{"requestId", "request"}``). Returns no PromptInfo when there is no request id.
    """
    request = _request_of(data)
    request_id = _text(data.get("requestId"))
    kind, title, detail = describe_request(request)
    tool_call_id = _text(request.get("toolCallId") or data.get("toolCallId"))
    enriched = dict(data)
    enriched.update(
        {
            "requestId": request_id,
            "toolCallId": tool_call_id,
            "kind": kind,
            "title": title,
            "detail": clip(detail, _DETAIL_MAX),
            "options": permission_options(kind, request),
        }
    )
    info = PromptInfo(request_id, kind, tool_call_id, request) if request_id else None
    return enriched, info


def permission_options(kind: str, request: Mapping[str, Any]) -> list[dict[str, str]]:
    """Allow once, allow *what exactly* for the session (when the CLI offers it), reject.

    The session-wide approval is as narrow as the CLI makes it (a shell approval covers the
    listed commands only), so the option says what it covers; it is left out when the CLI
    says it cannot offer one or the request has nothing to scope it to.
    """
    options = [dict(_ALLOW_ONCE_OPTION)]
    scope = session_scope(kind, request)
    if scope and request.get("canOfferSessionApproval") is not False:
        options.append({"optionId": ALLOW_ALWAYS, "name": f"Allow {scope} for this session", "kind": "allow_always"})
    options.append(dict(_REJECT_OPTION))
    return options


def session_scope(kind: str, request: Mapping[str, Any]) -> str:
    """What a session approval of this request covers, in words ("" when it has no scope)."""
    if kind == "shell":
        ids = _command_ids(request)
        return "“" + "”, “".join(ids) + "”" if ids else ""
    if kind == "mcp" and isinstance(request.get("serverName"), str):
        tool = request.get("toolName")
        return f"{request['serverName']}/{tool if isinstance(tool, str) else '*'}"
    if kind == "custom-tool" and isinstance(request.get("toolName"), str):
        return f"tool {request['toolName']}"
    if kind == "url" and (host := _host(request.get("url"))):
        return f"requests to {host}"
    return {"write": "all file writes", "read": "all file reads", "memory": "memory updates"}.get(kind, "")


def _host(url: Any) -> str:
    """The host a URL the agent sent names ("" for one that is not a URL, "http://[::1" too)."""
    if not isinstance(url, str):
        return ""
    try:
        return urlparse(url).hostname or ""
    except ValueError:
        return ""


def decision_for(option_id: str, info: PromptInfo | None) -> Any:
    """The SDK decision object for one of our option ids (ValueError for others)."""
    from copilot.generated import rpc

    if option_id == ALLOW_ONCE:
        return rpc.PermissionDecisionApproveOnce()
    if option_id in (REJECT_ONCE, CANCELLED):
        return rpc.PermissionDecisionReject()
    if option_id != ALLOW_ALWAYS:
        raise ValueError(f"unknown permission option {option_id!r}")
    scoped = _session_approval(info) if info is not None else None
    if scoped is None:
        log.info("copilot: no session-wide approval for this request; approving once")
        return rpc.PermissionDecisionApproveOnce()
    return scoped


def _session_approval(info: PromptInfo) -> Any:
    """Approve-for-session scoped to what was asked; None when the kind has no scope."""
    from copilot.generated import rpc

    req = info.request
    approval: Any = None
    if info.kind == "shell":
        ids = _command_ids(req)
        if not ids:
            return None
        approval = rpc.PermissionDecisionApproveForSessionApprovalCommands(command_identifiers=ids)
    elif info.kind == "write":
        approval = rpc.PermissionDecisionApproveForSessionApprovalWrite()
    elif info.kind == "read":
        approval = rpc.PermissionDecisionApproveForSessionApprovalRead()
    elif info.kind == "memory":
        approval = rpc.PermissionDecisionApproveForSessionApprovalMemory()
    elif info.kind == "mcp" and isinstance(req.get("serverName"), str):
        approval = rpc.PermissionDecisionApproveForSessionApprovalMCP(
            server_name=req["serverName"],
            tool_name=req.get("toolName") if isinstance(req.get("toolName"), str) else None,
        )
    elif info.kind == "custom-tool" and isinstance(req.get("toolName"), str):
        approval = rpc.PermissionDecisionApproveForSessionApprovalCustomTool(tool_name=req["toolName"])
    elif info.kind == "url":
        host = _host(req.get("url"))
        return rpc.PermissionDecisionApproveForSession(domain=host) if host else None
    if approval is None:
        return None
    return rpc.PermissionDecisionApproveForSession(approval=approval)


def aborted_completion(tool_call_id: str, tool_name: str = "") -> AgentEvent:
    """The ``tool.execution_complete`` the CLI never sends for a tool cut off by abort."""
    data: dict[str, Any] = {
        "toolCallId": tool_call_id,
        "success": False,
        "error": {"message": "aborted", "code": "aborted"},
        "synthetic": True,
    }
    if tool_name:
        data["toolName"] = tool_name
    return AgentEvent("tool.execution_complete", data)
