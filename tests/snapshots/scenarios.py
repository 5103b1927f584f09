"""Deterministic states for snapshots, built by feeding events on virtual time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from textual.widgets import Input, RadioButton, TextArea

from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.chat import ItemKind
from polypilot_tui.domain.events import EventType
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode, SandboxRules
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.workspace import Isolation, Workspace
from polypilot_tui.ui.screens.details import SessionDetailsScreen
from polypilot_tui.ui.screens.finish import FinishScreen
from polypilot_tui.ui.screens.new_session import NewSessionScreen
from tests.snapshots.fakes import DENIAL, Driver
from tests.ui.helpers import engine_of

REPLY = (
    "Here is the plan:\n\n1. Read `parser.py`\n2. Split `parse_line` in two\n3. Run the tests\n\n"
    "```python\ndef parse_line(text: str) -> Token:\n    ...\n```"
)


async def stuck_session(d: Driver, name: str = "stuck") -> str:
    """A turn the watchdog ended: no events past the 120 s inactivity tier."""
    sid = await d.add(name)
    await d.send(sid, "summarise the build log")
    d.turn_start(sid)
    await d.clock.advance(125)
    return sid


async def streaming_session(d: Driver, name: str = "refactor") -> str:
    """A turn in flight: earlier turn, reasoning, tools done/failed/running, reply streaming."""
    sid = await d.add(name)
    await d.finished_turn(sid, "what does parse_line do?", "It splits a line into **tokens**.")
    await d.send(sid, "refactor parse_line and run the tests")
    d.turn_start(sid)
    d.emit(sid, EventType.REASONING_DELTA, reasoningId="r2", deltaContent="Look at the code first.")
    d.say(sid, "Let me look at the code first.", final=False)
    d.tool(
        sid,
        "view",
        "src/parser.py",
        output="def parse_line(text):\n    parts = text.split()\n"
        "    return [Token(p) for p in parts]\n# 40 more lines\nEOF",
    )
    d.tool(sid, "bash", "pytest -q tests/test_parser.py", success=False, error="1 failed, 12 passed: test_empty_line")
    d.tool(sid, "bash", "pytest -q", output=None)
    d.stream(sid, REPLY)
    return sid


async def all_statuses(d: Driver) -> dict[str, str]:
    """One session in every status (s1 is the app's default session, idle)."""
    ids = {"idle": "s1", "stuck": await stuck_session(d)}
    ids["sending"] = sid = await d.add("sending")
    await d.send(sid, "hello")
    ids["thinking"] = sid = await d.add("thinking")
    await d.send(sid, "think hard")
    d.turn_start(sid)
    ids["working"] = sid = await d.add("working")
    await d.send(sid, "run the tests")
    d.turn_start(sid)
    for n in range(8):
        d.tool(sid, "bash", f"pytest -q tests/test_{n}.py", output="ok")
    d.tool(sid, "bash", "pytest -q", output=None)
    ids["awaiting_permission"] = sid = await d.add("asks")
    await d.send(sid, "write notes.txt")
    d.turn_start(sid)
    call = d.tool(sid, "bash", "echo hello > notes.txt", output=None)
    d.ask_permission(sid, call, "Run shell command: echo hello > notes.txt", "echo hello > notes.txt")
    ids["recovering"] = sid = await denied_session(d)
    ids["connecting"] = await d.add("connecting", agent="hangs")
    ids["disconnected"] = sid = await d.add("disconnected")
    d.emit(sid, EventType.CONNECTION_LOST, reason="agent process exited with code 1")
    ids["error"] = sid = await d.add("error")
    await d.send(sid, "hi")
    d.turn_start(sid)
    d.emit(sid, EventType.SESSION_ERROR, errorType="model", message="model overloaded (HTTP 529)")
    ids["stopped"] = sid = await d.add("stopped")
    await d.send(sid, "long essay")
    d.turn_start(sid)
    d.stream(sid, "Once upon a time")
    await d.manager.stop(sid)
    ids["unread"] = sid = await d.add("finished-unseen")
    await d.finished_turn(sid, "hello", "Hi!")
    await d.advance(45)
    return ids


async def denied_session(d: Driver, name: str = "denied") -> str:
    """Three permission denials trip the window; the reconnect hangs, so it stays recovering."""
    sid = await d.add(name, agent="flaky")
    await d.send(sid, "fix the build")
    d.turn_start(sid)
    for command in ("git status", "git diff", "make"):
        d.tool(sid, "bash", command, success=False, error=DENIAL)
    await d.clock.settle()
    return sid


async def interrupted_session(d: Driver) -> str:
    """A session restored mid-turn whose agent lost the turn: the resend notice shows."""
    session = Session("s9", "restored", "lost", created_wall=d.clock.wall(), agent_session_id="agent-9")
    session.add_item(ItemKind.USER, "migrate the database", d.clock.wall())
    d.manager.adopt(session, mid_turn_prompt="migrate the database")
    await d.clock.settle()
    return "s9"


async def multiline_draft(d: Driver) -> None:
    """A three-line prompt typed (ctrl+j between lines) and not sent yet."""
    d.app.select("s1")
    await d.settle()
    await d.pilot.press(*"Refactor parse_line:", "ctrl+j", *"- split it in two", "ctrl+j", *"- keep the tests green")
    await d.settle()


async def queued_prompts(d: Driver, held: bool) -> None:
    """Two prompts typed while a turn runs; with ``held``, the turn was then stopped."""
    sid = await d.add("busy")
    await d.send(sid, "refactor the parser")
    d.turn_start(sid)
    d.stream(sid, "Working on it: first I read")
    await d.manager.send(sid, "then update the changelog")
    await d.manager.send(sid, "and open a pull request\nwith a short summary")
    if held:
        await d.manager.stop(sid)
    d.app.select(sid)
    await d.settle()


async def codex_permission(d: Driver) -> str:
    """An ACP agent (codex) asks before its tool starts, with options whose labels state the
    scope at their very end: the whole label is shown, never cut where the scope is said."""
    sid = await d.add("codex")
    await d.send(sid, "write out.txt")
    d.turn_start(sid)
    d.ask_permission(
        sid,
        None,
        "/bin/bash -lc 'echo x > out.txt && echo wrote'",
        options=[
            {"optionId": "approved", "name": "Yes", "kind": "allow_once"},
            {
                "optionId": "approved-for-session",
                "kind": "allow_always",
                "name": "Yes, and don't ask again for commands that start with "
                "`/bin/bash -lc echo x > out.txt && echo wrote`",
            },
            {"optionId": "abort", "name": "No, and tell Codex what to do differently", "kind": "reject_once"},
        ],
    )
    return sid


async def failed_with_details(d: Driver) -> None:
    """A turn that failed; its details (agent, folders, logs, plan, stderr tail) are open.

    The screen gets the session's real view and fixed paths (a snapshot must not show the
    test's temporary folder); gathering the real details is tested in tests/agents.
    """
    sid = await d.add("broken")
    await d.send(sid, "hi")
    d.turn_start(sid)
    d.emit(
        sid,
        EventType.PLAN,
        entries=[
            {"content": "Read the failing test", "status": "completed"},
            {"content": "Fix the [b]parser[/b]", "status": "in_progress"},
            {"content": "Run the suite", "status": "pending"},
        ],
    )
    d.emit(sid, EventType.SESSION_ERROR, errorType="model", message="model server unreachable")
    d.app.select(sid)
    await d.settle()
    real = d.manager.details(sid)
    details = replace(
        real,
        folder="/home/me/project",
        state_folder="/home/me/.local/state/polypilot/sessions/s2",
        connected_how="new session",
    )
    d.app.push_screen(SessionDetailsScreen(details))
    await d.settle()


async def close_confirmation(d: Driver) -> None:
    """Close asked for a busy session: the confirmation is on screen."""
    sid = await d.add("worker")
    await d.send(sid, "write the report")
    d.turn_start(sid)
    d.app.select(sid)
    await d.settle()
    d.app.dashboard.action_close_session()
    await d.settle()


async def quit_confirmation(d: Driver) -> None:
    """Quit asked with two turns running."""
    for name in ("alpha", "beta"):
        sid = await d.add(name)
        await d.send(sid, "long job")
        d.turn_start(sid)
    await d.settle()
    await d.app.action_quit()
    await d.settle()


HOSTILE_REPLY = (
    "Use List<String> and <br> here; <div>x</div> is text too.\n\n"
    "Markup stays literal: [bold]literal[/bold] and [red]x[/]. Escapes go: \x1b[31mred\x1b[0m "
    "\x1b]8;;http://evil.example\x07link\x1b]8;;\x07 and a [real link](https://example.com).\n\n"
    "| cell | note |\n|---|---|\n"
    "| <b>two</b> | a long cell that wraps over several lines instead of being cut short with an "
    "ellipsis, right up to its last-word |\n"
    "| 漢字テーブル | 😀 emoji 🎉 aligned |\n\n"
    "```python\nx = '" + "long " * 60 + "'  # the end\nprint(x)\n```\n\n"
    "- a list item with `inline <code>`\n- 2 > 1 && 1 < 2\n"
)
"""Agent text a markdown renderer is tempted to drop, cut, wrap or interpret."""

TOOL_OUTPUT = "\n".join(
    [f"line {n}: <tag> [bold]not bold[/bold]" for n in range(1, 13)]
    + ["a long line that is not cut when the row is unfolded: " + "word " * 30 + "END"]
)


async def hostile_session(d: Driver, name: str = "hostile") -> str:
    """A finished turn whose reply and tool output hold hostile text (a session restored with it)."""
    return await d.restored(name, hostile_rows)


def hostile_rows(session: Session) -> None:
    wall = session.created_wall  # now, on the test's clock
    session.add_item(ItemKind.USER, "show me <everything> [b]now[/b]", wall)
    session.add_item(
        ItemKind.TOOL,
        TOOL_OUTPUT,
        wall,
        tool_call_id="c1",
        tool_name="bash",
        tool_status="completed",
        tool_detail="cat notes.txt",
    )
    session.add_item(ItemKind.ASSISTANT, HOSTILE_REPLY, wall)


async def tool_states_session(d: Driver, name: str = "tools") -> str:
    """One tool row per status a finished turn leaves, the long one unfolded by the test (a
    session restored with them). A restart settles a running row or one waiting for permission
    as interrupted: those two are pictured live, in all_statuses_wide and permission_prompt."""
    return await d.restored(name, tool_rows)


def tool_rows(session: Session) -> None:
    wall = session.created_wall  # now, on the test's clock
    session.add_item(ItemKind.USER, "run everything", wall)
    for n, status in enumerate(("completed", "failed", "rejected", "interrupted", "cancelled"), start=2):
        session.add_item(
            ItemKind.TOOL,
            f"output of {status}",
            wall,
            tool_call_id=f"c{n}",
            tool_name="bash",
            tool_status=status,
            tool_detail=f"step {n}",
        )
    session.add_item(
        ItemKind.TOOL,
        TOOL_OUTPUT,
        wall,
        tool_call_id="c9",
        tool_name="bash",
        tool_status="completed",
        tool_detail="cat notes.txt",
    )


async def new_session_dialog(d: Driver, folder: str = "/home/dev/notes") -> NewSessionScreen:
    """The new-session dialog on ``folder``, once it has looked at it."""
    d.app.dashboard.new_session.launch_folder = folder
    d.app.dashboard.action_new_session()
    await d.settle()
    screen = d.app.screen
    assert isinstance(screen, NewSessionScreen)
    while screen.inspected != folder:
        await d.pilot.pause(0.01)
    return screen


async def new_session_in_git(d: Driver) -> None:
    """The new-session dialog on a git checkout with uncommitted changes, a worktree picked."""
    screen = await new_session_dialog(d, "/home/dev/polypilot")
    await d.pilot.click("#worktree")
    screen.query_one("#name", Input).value = "fix login"
    await d.settle()
    screen.query_one("#agent-list").focus()


async def finish_dialog(d: Driver) -> None:
    """The Finish dialog of a session in its own worktree (fixed state: see fakes.FixedEngine)."""
    await engine_of(d.app).changes.close()  # fixed paths that do not exist: a real count would mark them gone
    workspace = Workspace(
        "/home/dev/.local/state/polypilot/worktrees/polypilot-1a2b3c4d/polypilot-fix-login",
        Isolation.WORKTREE,
        "/home/dev/polypilot",
        "polypilot/fix-login",
        "main",
        "3f2c1a9d0b7e4c55a1d2e3f4a5b6c7d8e9f0a1b2",
    )
    sid = d.manager.add_session("demo", "fix-login", workspace=workspace)
    await d.settle()
    d.app.select(sid)
    await d.settle()
    d.app.dashboard.action_finish_session()
    await d.settle()
    screen = d.app.screen
    assert isinstance(screen, FinishScreen)
    while screen.state is None or not screen.query_one(TextArea).text:
        await d.pilot.pause(0.01)
    screen.query_one(TextArea).move_cursor((0, 0))


async def worktree_sessions(d: Driver) -> None:
    """Three sessions on one repository: two in worktrees of their own with changes counted,
    one in the checkout; one worktree was deleted behind the app's back (its details open).

    The counts are set as the engine's counter sets them (it is stopped first: the paths are
    fixed ones that do not exist here, so a real count would only find them gone).
    """
    await engine_of(d.app).changes.close()
    repo = "/home/dev/shop"
    root = "/home/dev/.local/state/polypilot/worktrees/shop-1a2b3c4d"
    sessions = [
        ("checkout", Workspace(repo, Isolation.FOLDER, repo, "main", "main", "a" * 40), ChangeStats(1, 3, 0), ""),
        (
            "fix-login",
            Workspace(f"{root}/polypilot-fix-login", Isolation.WORKTREE, repo, "polypilot/fix-login", "main", "a" * 40),
            ChangeStats(3, 120, 4),
            "",
        ),
        (
            "dark-mode",
            Workspace(f"{root}/polypilot-dark-mode", Isolation.WORKTREE, repo, "polypilot/dark-mode", "main", "a" * 40),
            ChangeStats(),
            f"its folder {root}/polypilot-dark-mode is gone",
        ),
    ]
    for name, workspace, changes, problem in sessions:
        sid = d.manager.add_session("demo", name, workspace=workspace)
        d.manager.set_changes(sid, changes, problem)
    await d.settle()


SANDBOX_RULES = SandboxRules(
    writable=("/home/dev/proj", "/home/dev/.copilot"),
    protected=("/home/dev/proj/.git/hooks", "/home/dev/proj/.git/config"),
    hidden=("/home/dev/.ssh", "/home/dev/.aws", "/home/dev/.config/gh", "/home/dev/.local/state/polypilot"),
)


async def sandboxed_sessions(d: Driver) -> str:
    """Issue 27: a sandboxed session (a write it refused, in its tool rows), one whose sandbox
    has a network rule, one without (restored with them)."""
    await d.restored("netbox", lambda s: _sandboxed(s, Sandbox(SandboxMode.WORKSPACE, ("api.example.com:443",))))
    await d.restored("plain", lambda s: None)
    return await d.restored("boxed", lambda s: _sandboxed(s, Sandbox(SandboxMode.WORKSPACE), refused_rows))


def _sandboxed(session: Session, sandbox: Sandbox, rows: Callable[[Session], None] | None = None) -> None:
    session.sandbox, session.cwd = sandbox, "/home/dev/proj"
    if rows is not None:
        rows(session)


def refused_rows(session: Session) -> None:
    wall = session.created_wall
    session.add_item(ItemKind.USER, "add the key to my ssh config", wall)
    session.add_item(
        ItemKind.TOOL, "hi\n", wall, tool_call_id="c1", tool_name="bash", tool_status="completed", tool_detail="ls"
    )
    session.add_item(
        ItemKind.TOOL,
        "bash: line 1: /home/dev/.ssh/config: Read-only file system\n<shellId: 0 completed with exit code 1>",
        wall,
        tool_call_id="c2",
        tool_name="bash",
        tool_status="refused",
        tool_detail="echo 'Host *' >> ~/.ssh/config",
    )
    session.add_item(ItemKind.ASSISTANT, "The sandbox keeps `~/.ssh` out of reach: I could not change it.", wall)


async def sandbox_details(d: Driver) -> None:
    """F2 on a sandboxed fan-out's attempt: its sandbox, the rules it runs under, its policy."""
    sid = await sandboxed_sessions(d)
    d.manager.set_attempt_of(sid, "g1")
    d.app.select(sid)
    await d.settle()
    details = replace(
        d.manager.details(sid),
        folder="/home/dev/proj",
        state_folder="/home/dev/.local/state/polypilot/sessions/boxed",
        sandbox_rules=SANDBOX_RULES.lines(),
    )
    d.app.push_screen(SessionDetailsScreen(details))
    await d.settle()


async def new_session_sandboxed(d: Driver) -> None:
    """The new-session dialog with the workspace sandbox chosen."""
    screen = await new_session_dialog(d)
    screen.query_one("#sandbox-workspace", RadioButton).value = True
    await d.settle()
