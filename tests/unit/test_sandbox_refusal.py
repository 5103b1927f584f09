"""A refused write reads as the sandbox's refusal: real texts of bash, coreutils, git, Python
and Node, collected by running them inside ``bwrap --unshare-all --ro-bind / / --dev /dev
--proc /proc --tmpfs /tmp --bind WS WS --tmpfs HIDDEN`` as root and as an unprivileged user
(bubblewrap 0.8, Python 3.11, Node 20)."""

from __future__ import annotations

import pytest

from polypilot_tui.domain.sandbox import SandboxRules
from polypilot_tui.domain.sandbox_refusal import refused_by_sandbox

WS = "/tmp/sbp-ws"
RULES = SandboxRules(writable=(WS, "/root/.copilot"), hidden=("/tmp/sbp-hidden", "/root/.ssh"))

NODE_EROFS = """node:fs:2380
    return binding.writeFileUtf8(
                   ^

Error: EROFS: read-only file system, open '/etc/evil'
    at Object.writeFileSync (node:fs:2380:20)
  errno: -30,
  code: 'EROFS',
  syscall: 'open',
  path: '/etc/evil'
}

Node.js v20.20.2"""

REFUSED = [
    "bash: line 1: /etc/evil: Read-only file system",
    "touch: cannot touch '/etc/hostname': Read-only file system",
    "mkdir: cannot create directory ‘/opt/new’: Read-only file system",
    "rm: cannot remove '/etc/hostname': Read-only file system",
    "cp: cannot create regular file '/var/evil': Read-only file system",
    "mv: cannot move '/etc/hostname' to '/etc/h2': Read-only file system",
    "ln: failed to create symbolic link '/etc/l': Read-only file system",
    "fatal: cannot mkdir /etc/repo: Read-only file system",
    'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
    "OSError: [Errno 30] Read-only file system: '/etc/evil'",
    NODE_EROFS,
    "Error: EROFS: read-only file system, mkdir '/etc/newdir'",
    "Error: EROFS: read-only file system, unlink '/etc/hostname'",
    # an unprivileged user: a file of another owner outside the writable folders
    "bash: line 1: /root/evil: Permission denied",
    "touch: cannot touch '/etc/hostname': Permission denied",
    "PermissionError: [Errno 13] Permission denied: '/root/evil'",
    "Error: EACCES: permission denied, open '/etc/hostname'",
    # inside a hidden folder (an empty tmpfs)
    "bash: line 1: /tmp/sbp-hidden/sub/evil: No such file or directory",
    "cat: /root/.ssh/id_rsa: No such file or directory",
    "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/sbp-hidden/sub/evil'",
    "Error: ENOENT: no such file or directory, open '/tmp/sbp-hidden/sub/evil'",
    # Copilot's shell result: the output, then its own line
    "touch: cannot touch '/etc/x': Read-only file system\n<shellId: 0 completed with exit code 1>",
]

NOT_REFUSED = [
    "",
    "hi",
    "touch: cannot touch '/proc/evil': No such file or directory",  # missing, not hidden
    "cat: missing.txt: No such file or directory",
    "bash: line 1: ./run.sh: Permission denied",  # inside the workspace: its own mode bits
    f"PermissionError: [Errno 13] Permission denied: '{WS}/locked.txt'",
    "Error: EACCES: permission denied",  # names no path
    "error: could not lock config file: File exists",
    "Traceback (most recent call last):\nValueError: bad value",
]


@pytest.mark.parametrize("text", REFUSED)
def test_a_write_the_sandbox_refused_is_told(text: str) -> None:
    assert refused_by_sandbox(text, RULES, WS)


@pytest.mark.parametrize("text", NOT_REFUSED)
def test_other_failures_are_not_blamed_on_the_sandbox(text: str) -> None:
    assert not refused_by_sandbox(text, RULES, WS)


# A path kept read-only inside the workspace is a mount point: removing or renaming it is
# "busy" (collected with ``--ro-bind WS/.git/hooks WS/.git/hooks --ro-bind WS/.git/config …``).
PROTECTED = SandboxRules(writable=(WS,), protected=(f"{WS}/.git/hooks", f"{WS}/.git/config", f"{WS}/.git"))
BUSY_REFUSED = [
    "mv: cannot move '.git/config' to '.git/c2': Device or resource busy",
    "rm: cannot remove '.git/config': Device or resource busy",
    "rm: cannot remove '.git/hooks': Device or resource busy",
    "rmdir: failed to remove '.git/hooks': Device or resource busy",
    "mv: cannot move '.git' to 'gitfile': Device or resource busy",  # a worktree's .git file
    "OSError: [Errno 16] Device or resource busy: '.git/config' -> 'c'",
    f"OSError: [Errno 16] Device or resource busy: '{WS}/.git/hooks'",
    "Error: EBUSY: resource busy or locked, rename '.git/config' -> 'c'",
    "Error: EBUSY: resource busy or locked, rmdir '.git/hooks'",
]


@pytest.mark.parametrize("text", BUSY_REFUSED)
def test_removing_or_renaming_what_the_sandbox_keeps_read_only_is_its_refusal(text: str) -> None:
    assert refused_by_sandbox(text, PROTECTED, WS)
    assert not refused_by_sandbox(text, SandboxRules(writable=(WS,)), WS)  # not kept: busy for its own reasons


def test_a_busy_path_the_sandbox_lets_it_write_is_not_blamed_on_it() -> None:
    assert not refused_by_sandbox("rm: cannot remove 'mnt': Device or resource busy", PROTECTED, WS)
    assert not refused_by_sandbox("Error: EBUSY: resource busy or locked, unlink 'out.log'", PROTECTED, WS)


def test_a_relative_path_is_placed_from_the_session_folder() -> None:
    assert not refused_by_sandbox("touch: cannot touch 'out/x': Permission denied", RULES, WS)
    assert refused_by_sandbox("touch: cannot touch '../x': Permission denied", RULES, WS)


# ---- the tool row: every surface reads its status ----------------------------------------

COPILOT_EROFS = {  # Copilot's shell result: the tool "succeeded", the command exited 1
    "success": True,
    "result": {
        "content": "touch: cannot touch '/etc/x': Read-only file system\n<shellId: 0 completed with exit code 1>",
        "contents": [{"exitCode": 1, "shellId": "0", "type": "shell_exit", "cwd": WS}],
    },
    "shellExecution": {"exitCode": 1},
}
ACP_EACCES = {
    "success": False,
    "status": "failed",
    "result": {"content": "bash: line 1: /root/evil: Permission denied"},
}


def run_tool(session, done: dict, call: str = "c1") -> str:
    from polypilot_tui.domain.clock import FakeClock
    from polypilot_tui.domain.events import AgentEvent, EventType
    from polypilot_tui.domain.reducer import Signal, apply_event

    wall = FakeClock()
    apply_event(session, AgentEvent(EventType.TOOL_START, {"toolCallId": call, "toolName": "bash"}), 1.0, wall)
    signal = apply_event(session, AgentEvent(EventType.TOOL_COMPLETE, {"toolCallId": call, **done}), 2.0, wall)
    assert signal is Signal.NONE
    [row] = [i for i in session.history if i.tool_call_id == call]
    return row.tool_status


def sandboxed(on: bool = True):
    from polypilot_tui.domain.sandbox import NO_SANDBOX, Sandbox, SandboxMode
    from polypilot_tui.domain.session import Session

    session = Session("s1", "one", "copilot", cwd=WS, sandbox=Sandbox(SandboxMode.WORKSPACE) if on else NO_SANDBOX)
    session.begin_turn("go", 0.0)
    return session


def test_the_row_of_a_refused_tool_says_so_and_other_rows_are_as_before() -> None:
    from polypilot_tui.domain.chat import TOOL_STATUS_WORDS

    assert run_tool(sandboxed(), COPILOT_EROFS) == "refused"
    assert TOOL_STATUS_WORDS["refused"] == "refused by the sandbox"
    assert run_tool(sandboxed(), ACP_EACCES) == "refused"
    assert run_tool(sandboxed(on=False), COPILOT_EROFS) == "completed"  # no sandbox: not its doing
    assert run_tool(sandboxed(on=False), ACP_EACCES) == "failed"
    ok = {"success": True, "result": {"content": "grep: Read-only file system"}, "shellExecution": {"exitCode": 0}}
    assert run_tool(sandboxed(), ok) == "completed"  # it succeeded: whatever it printed


def test_hidden_folders_are_read_from_the_rules_the_agent_was_started_with() -> None:
    missing = {"success": False, "result": {"content": "cat: /root/.ssh/id_rsa: No such file or directory"}}
    assert run_tool(sandboxed(), missing) == "failed"  # hidden folders unknown: no guess
    session = sandboxed()
    session.sandbox_rules = RULES
    assert run_tool(session, missing) == "refused"


def test_sandbox_refusals_do_not_trip_the_permission_recovery() -> None:
    """Three "Permission denied" in five tools is the sign of a lost permission binding
    (PolyPilot #285); from the sandbox they are its rule at work: no reconnect, no resend."""
    session = sandboxed()
    for n in range(5):
        assert run_tool(session, ACP_EACCES, f"c{n}") == "refused"
    assert not session.window.tripped and not session.permission_warning


def test_polypilot_follow_says_a_tool_was_refused_by_the_sandbox() -> None:
    """Live, a refused shell's completion printed "[tool ok]" (it ran and exited 1): its row's
    replacement says what it was; read back from the history the row says it itself."""
    import io

    from polypilot_tui.commands.follow import Render
    from polypilot_tui.commands.output import Output
    from polypilot_tui.domain.chat import ChatItem, ItemKind

    def printed(status: str, live: bool, replaced: bool) -> str:
        stream = io.StringIO()
        row = ChatItem(ItemKind.TOOL, "x", 1.0, "c1", "bash", status, "touch /etc/x")
        Render(Output(stream), json_mode=False).row(3, row, live=live, replaced=replaced)
        return stream.getvalue()

    assert printed("refused", live=True, replaced=True) == "[tool bash] refused by the sandbox\n"
    assert printed("failed", live=True, replaced=True) == ""  # its completion said "[tool failed]"
    assert printed("refused", live=False, replaced=False) == "[tool bash] refused by the sandbox touch /etc/x\n"


# opencode 1.18's bash tool in a sandboxed worktree, as it sent it (ACP transcript of the trial
# in tmux): the tool "completed" — its metadata says the command exited 1.
OPENCODE_REFUSED = [
    {
        "sessionUpdate": "tool_call",
        "toolCallId": "call_17_tool",
        "title": "bash",
        "kind": "execute",
        "status": "pending",
        "locations": [{"path": WS}],
        "rawInput": {"cwd": WS},
    },
    {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_17_tool",
        "status": "in_progress",
        "kind": "execute",
        "title": "echo oc > oc.txt; echo evil > /etc/evil",
        "rawInput": {"command": "echo oc > oc.txt; echo evil > /etc/evil", "description": "Run", "cwd": WS},
    },
    {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_17_tool",
        "status": "completed",
        "title": "echo oc > oc.txt; echo evil > /etc/evil",
        "content": [
            {
                "type": "content",
                "content": {"type": "text", "text": "/bin/bash: line 1: /etc/evil: Read-only file system\n"},
            }
        ],
        "rawOutput": {
            "output": "/bin/bash: line 1: /etc/evil: Read-only file system\n",
            "metadata": {
                "output": "/bin/bash: line 1: /etc/evil: Read-only file system\n",
                "exit": 1,
                "truncated": False,
            },
        },
    },
]


def acp_row(session, updates: list[dict]) -> str:
    from polypilot_tui.agents.acp.mapping import UpdateMapper
    from polypilot_tui.domain.clock import FakeClock
    from polypilot_tui.domain.events import AgentEvent
    from polypilot_tui.domain.reducer import apply_event

    events: list[AgentEvent] = []
    mapper = UpdateMapper(events.append)
    for update in updates:
        mapper.handle(update)
    for n, event in enumerate(events):
        apply_event(session, event, float(n), FakeClock())
    [row] = [i for i in session.history if i.tool_call_id == "call_17_tool"]
    return row.tool_status


@pytest.mark.parametrize(
    "raw_output",
    [
        OPENCODE_REFUSED[2]["rawOutput"],  # opencode: metadata.exit
        {"output": "/bin/bash: line 1: /etc/evil: Read-only file system\n", "exit_code": 1},
        {"output": "/bin/bash: line 1: /etc/evil: Read-only file system\n", "exitCode": 1},
    ],
)
def test_an_acp_shell_that_completed_with_a_non_zero_exit_after_a_refused_write_is_refused(raw_output: dict) -> None:
    """An ACP agent's shell "completes" whatever its command's exit: the exit code in its raw
    output is what says it failed (opencode's row read ✓ for a write the sandbox refused)."""
    updates = [*OPENCODE_REFUSED[:2], {**OPENCODE_REFUSED[2], "rawOutput": raw_output}]
    assert acp_row(sandboxed(), updates) == "refused"
    assert acp_row(sandboxed(on=False), updates) == "completed"  # no sandbox: not its doing
    exited_0 = {**OPENCODE_REFUSED[2], "rawOutput": {"output": "x: Read-only file system", "metadata": {"exit": 0}}}
    assert acp_row(sandboxed(), [*OPENCODE_REFUSED[:2], exited_0]) == "completed"  # it succeeded
