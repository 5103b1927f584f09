"""allow-in-sandbox: the verdict on real permission requests of both backends.

The request shapes are the ones the real agents sent (Copilot CLI 0.0.x through the SDK,
opencode and codex-acp over ACP) against the scripted model, captured from their transcripts.
"""

from __future__ import annotations

from typing import Any

import pytest

from polypilot_tui.domain.sandbox import NO_SANDBOX, Sandbox, SandboxMode
from polypilot_tui.domain.sandbox_policy import reason_to_ask

WS = "/home/u/proj/wt"
ON = Sandbox(SandboxMode.WORKSPACE)


def copilot(request: dict[str, Any]) -> dict[str, Any]:
    """A ``permission.requested`` event's data as the Copilot backend hands it on."""
    return {"requestId": "r1", "permissionRequest": request, "kind": request["kind"], "toolCallId": "call_1"}


def shell(command: str, **extra: Any) -> dict[str, Any]:
    return copilot(
        {
            "canOfferSessionApproval": False,
            "commands": [{"identifier": command, "readOnly": False}],
            "fullCommandText": command,
            "hasWriteFileRedirection": False,
            "intention": "Run a shell command",
            "kind": "shell",
            "possiblePaths": [],
            "possibleUrls": [],
            "toolCallId": "call_1_tool",
            **extra,
        }
    )


def write(path: str) -> dict[str, Any]:
    return copilot(
        {
            "canOfferSessionApproval": True,
            "diff": f"\ndiff --git a{path} b{path}\ncreate file mode 100644\n+hi\n",
            "fileName": path,
            "intention": "Create file",
            "kind": "write",
            "fileEdits": [{"after": {"content": "hi", "path": path}}],
            "newFileContents": "hi",
            "toolCallId": "call_8_step0",
        }
    )


def read(path: str) -> dict[str, Any]:
    return copilot({"intention": f"Read file: {path}", "kind": "read", "path": path, "toolCallId": "call_10"})


def acp(kind: str, raw: dict[str, Any], locations: tuple[str, ...] = ()) -> dict[str, Any]:
    """An ACP agent's ``permission.requested`` data (what the desk emits of the tool call)."""
    return {
        "requestId": "perm-1",
        "toolCallId": "call_2_tool",
        "kind": kind,
        "title": "t",
        "detail": "d",
        "locations": [{"path": p} for p in locations],
        "rawInput": raw,
        "options": [{"optionId": "once", "name": "Allow once", "kind": "allow_once"}],
    }


def codex(script: str, cwd: str = WS) -> dict[str, Any]:
    return acp("execute", {"command": ["/bin/bash", "-lc", script], "cwd": cwd, "call_id": "call_1_tool"})


APPROVED = [
    shell("echo hi"),
    shell("ls"),
    shell("echo x > inside.txt && cat inside.txt"),
    shell("cat src/main.py 2>/dev/null | grep -n x"),
    shell(f"git -C {WS} status"),
    shell("/usr/bin/python3 tools/gen.py --out=build/x.json"),
    shell("FOO=bar make test", resolvedWorkingDirectory=WS + "/sub"),
    shell("cd sub && touch a/b"),
    write(WS + "/new.txt"),
    read(WS + "/README.md"),
    acp("execute", {"command": "echo x > inside.txt"}),
    codex("echo x > inside.txt"),
    acp("edit", {"filePath": WS + "/a.py"}, (WS + "/a.py",)),
    acp("read", {}, (WS + "/docs",)),
]

ASKED = [
    shell("echo x > /root/.ssh/evil"),
    shell("cat ../outside.txt"),
    shell("rm -rf ~/.aws"),
    shell("cd /etc && ls"),
    shell("curl http://example.com/x"),
    shell("cat $HOME/.netrc"),
    shell("echo $(cat /etc/shadow)"),
    shell('bash -c "echo x > /etc/evil"'),
    shell("python3 -c \"open('/etc/evil','w')\""),
    shell("gcc -o/usr/local/bin/x x.c"),
    shell("tar --file=/tmp/x.tar -c ."),
    shell("cat a/../../../etc/passwd"),
    shell("echo 'unterminated"),
    shell("ls", possiblePaths=["/etc/hosts"]),
    shell("ls", possibleUrls=[{"url": "https://example.com"}]),
    shell("ls", resolvedWorkingDirectory="/etc"),
    shell("ls", requestSandboxBypass=True),
    shell("ls", warning="This command may delete files"),
    write("/tmp/sbpolicy/out.txt"),
    write(WS + "-other/x"),
    read("/etc/hostname"),
    copilot({"intention": "Fetch", "kind": "url", "url": "http://example.com/"}),
    copilot({"kind": "mcp", "serverName": "fs", "toolName": "write", "toolTitle": "Write", "readOnly": False}),
    copilot({"kind": "memory", "fact": "x"}),
    copilot({"kind": "custom-tool", "toolName": "t", "toolDescription": "d"}),
    codex("echo x > /root/.ssh/evil"),
    codex("touch ../outside.txt"),
    codex("ls", cwd="/"),
    # opencode's own "external_directory" request: the folder it names lies outside.
    acp(
        "other",
        {"command": "touch ../outside.txt", "directories": ["/home/u/proj"], "patterns": ["/home/u/proj/*"]},
        ("/home/u/proj",),
    ),
    acp("fetch", {"url": "https://example.com"}),
    acp("edit", {}),
    acp("think", {}),
]


@pytest.mark.parametrize("data", APPROVED, ids=lambda d: str(d.get("detail") or d.get("permissionRequest")))
def test_inside_the_workspace_is_approved(data: dict[str, Any]) -> None:
    assert reason_to_ask(data, WS, ON) == ""


@pytest.mark.parametrize("data", ASKED)
def test_outside_or_unplaceable_is_asked(data: dict[str, Any]) -> None:
    assert reason_to_ask(data, WS, ON) != ""


@pytest.mark.parametrize("data", APPROVED[:4] + APPROVED[-3:])
def test_a_session_not_sandboxed_is_always_asked(data: dict[str, Any]) -> None:
    assert reason_to_ask(data, WS, NO_SANDBOX) == "the session does not run in a sandbox"


def test_a_session_without_a_folder_is_asked() -> None:
    assert reason_to_ask(shell("ls"), "", ON) == "the session has no workspace folder"


def test_the_reason_names_what_lies_outside() -> None:
    assert reason_to_ask(shell("echo x > /root/.ssh/evil"), WS, ON) == "it names /root/.ssh/evil, outside the workspace"
    fetch = acp("fetch", {"url": "https://example.com"})
    assert reason_to_ask(fetch, WS, ON) == "a fetch request is not about files in the workspace"
    assert reason_to_ask(shell("curl http://example.com/x"), WS, ON) == "it names http://example.com/x"


def test_an_acp_permission_event_carries_what_the_policy_places() -> None:
    """The desk's event holds the tool call's locations and the placing part of its rawInput
    (codex's real tool call here), never a write's content; too long a command is not cut
    but left out, and the request asked."""
    from polypilot_tui.agents.acp.client import placed_input

    call = {
        "toolCallId": "call_1_tool",
        "kind": "execute",
        "status": "pending",
        "title": "echo x > inside.txt",
        "rawInput": {
            "call_id": "call_1_tool",
            "command": ["/bin/bash", "-lc", "echo x > inside.txt"],
            "cwd": WS,
            "parsed_cmd": [{"type": "unknown", "cmd": "echo x > inside.txt"}],
            "content": "x" * 100_000,
        },
    }
    placed = placed_input(call)
    assert placed == {"locations": [], "rawInput": {"command": call["rawInput"]["command"], "cwd": WS}}
    assert reason_to_ask({"kind": "execute", **placed}, WS, ON) == ""
    huge = placed_input({**call, "rawInput": {"command": "echo " + "a" * 20_000 + " > /etc/x"}})
    assert huge == {"inputTooLong": True}
    assert reason_to_ask({"kind": "execute", **huge}, WS, ON) == "what it names is too long to place"


@pytest.mark.parametrize("policy", ["ask", "allow", "deny", "allow-in-sandbox"])
@pytest.mark.parametrize("attempt", ["", "g1"])
@pytest.mark.parametrize("sandbox", [NO_SANDBOX, ON])
@pytest.mark.parametrize("worker", [False, True])
def test_a_session_s_policy_is_never_wider_than_the_user_s(
    policy: str, attempt: str, sandbox: Sandbox, worker: bool
) -> None:
    """Only a sandboxed fan-out's attempt changes anything, and only ask into allow-in-sandbox:
    an orchestrator's worker, a session not sandboxed, deny and allow keep the user's policy."""
    from polypilot_tui.config import PermissionPolicy
    from polypilot_tui.domain.session import Session
    from polypilot_tui.engine.turns import policy_of

    session = Session("s1", "one", "demo", cwd=WS, sandbox=sandbox, attempt_of=attempt)
    session.team_parent = "s0" if worker else ""
    user = PermissionPolicy(policy)
    got = policy_of(session, user)
    if user is PermissionPolicy.ASK and attempt and sandbox.on:
        assert got is PermissionPolicy.ALLOW_IN_SANDBOX
    else:
        assert got is user
