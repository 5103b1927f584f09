"""The engine's JSON codec (engine/codec.py, msgspec) on what it moves most: views and rows.

200 session views (each with a workspace, a pending permission, usage and a named failure)
and 20,000 history rows are encoded to JSON-ready values and decoded back from what their JSON
text reads as (lists, as a client gets them), best of several runs. The codecs this one
replaced took, on the same machine: the hand-written one, views 5.6 ms to encode and 21.0 ms
to decode, rows 77 ms and 218 ms; pydantic's (2026-11-28, medians of 7 runs alternated with
this one's), views 3.2 ms and 4.2 ms, rows 21.9 ms and 35.1 ms (target: no slower than that).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bench._support import Row
from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.failures import Failure, FailureKind
from polypilot_tui.domain.safe_json import dump_json, load_json
from polypilot_tui.domain.turn import PermissionPrompt
from polypilot_tui.domain.usage import Usage
from polypilot_tui.domain.view import SessionStatus, SessionView
from polypilot_tui.domain.workspace import Isolation, Workspace
from polypilot_tui.engine.codec import decode, encode

VIEWS = 200
ROWS = 20_000
RUNS = 7
OLD = {"views": (5.6, 21.0), "rows": (77.0, 218.0)}
"""The hand-written codec's milliseconds (encode, decode), measured before it was replaced."""
PYDANTIC = {"views": (3.2, 4.2), "rows": (21.9, 35.1)}
"""pydantic's codec's milliseconds (encode, decode), measured before it was replaced."""


def view(i: int) -> SessionView:
    options = (("allow_once", "Allow", "allow_once"), ("reject_once", "Reject", "reject_once"))
    return SessionView(
        id=f"s{i}",
        name=f"session {i}",
        agent="copilot",
        status=SessionStatus.AWAITING_PERMISSION,
        reason="write file x",
        revision=i * 7,
        model="gpt-5",
        cwd="/home/u/p",
        turn_started_at=12.5,
        last_activity_at=13.25,
        tool_calls=3,
        active_tool="bash",
        pending_permission=PermissionPrompt("r1", "Write file x", "detail", "write", "t1", options),
        pending_permissions=1,
        history_len=40,
        gives_up_at=600.0,
        branch="polypilot/x",
        worktree=True,
        changes=ChangeStats(3, 40, 2),
        workspace=Workspace("/wt/x", Isolation.WORKTREE, "/repo", "polypilot/x", "main", "deadbeef"),
        usage=Usage(1000, 200, 50, 3000, 128000, 0.12, "USD", 0.12, True),
        failure=Failure(FailureKind.NEEDS_SIGN_IN, "needs sign-in", "sign in", "text"),
    )


def row(i: int) -> ChatItem:
    kind = (ItemKind.USER, ItemKind.ASSISTANT, ItemKind.TOOL)[i % 3]
    tool = kind is ItemKind.TOOL
    text = "some text of a reply with a few words in it " * 4
    return ChatItem(kind, text, 1.7e9 + i, f"t{i}" if tool else None, "bash" if tool else "", "completed" * tool)


def best(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def main() -> list[Row]:
    rows: list[Row] = []
    for name, values, form in (
        ("views", tuple(view(i) for i in range(VIEWS)), tuple[SessionView, ...]),
        ("rows", tuple(row(i) for i in range(ROWS)), tuple[ChatItem, ...]),
    ):
        plain = load_json(dump_json(encode(values, form)), "bench")  # arrays are lists, as a client reads them
        assert decode(form, plain) == values
        enc, dec = best(lambda v=values, f=form: encode(v, f)), best(lambda p=plain, f=form: decode(f, p))
        (old_enc, old_dec), (was_enc, was_dec) = OLD[name], PYDANTIC[name]
        count = VIEWS if name == "views" else ROWS
        print(f"{count} {name}: encode {enc:.1f} ms (pydantic {was_enc}), decode {dec:.1f} ms (pydantic {was_dec})")
        rows.append(
            (
                f"codec: {count:,} {name} encoded, decoded",
                f"{enc:.1f} ms, {dec:.1f} ms (pydantic: {was_enc:g} ms, {was_dec:g} ms;"
                f" hand-written: {old_enc:g} ms, {old_dec:g} ms)",
                "no slower than pydantic's codec",
            )
        )
    return rows
