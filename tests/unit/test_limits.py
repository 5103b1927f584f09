"""The limits compose (domain/limits.py): a session filled to every limit a user can fill, with
an agent's texts far past theirs, makes a view, a registry record and a whole registry file
within what their readers take; and the redactor grows text no more than the derivation allows."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from polypilot_tui.domain.chat import ItemKind, TurnRecord
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.gathered import Gathered
from polypilot_tui.domain.limits import (
    CUT_NOTE_CHARS,
    HELD_BYTES,
    ID_CHARS,
    NAME_CHARS,
    PATH_CHARS,
    PROMPT_BYTES,
    QUEUE_BYTES,
    QUEUE_PROMPTS,
    RECORD_BYTES,
    REDACTION_GROWTH,
    REF_CHARS,
    REGISTRY_BYTES,
    ROW_CHARS,
    SANDBOX_HOST_CHARS,
    SANDBOX_HOSTS,
    SESSIONS,
    VIEW_BYTES,
    bounded,
    saved_bytes,
)
from polypilot_tui.domain.prompt_queue import QueuedPrompt
from polypilot_tui.domain.reducer import apply_event
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.sandbox import Sandbox, SandboxMode
from polypilot_tui.domain.session import Session
from polypilot_tui.domain.turn import EndCause, Outcome
from polypilot_tui.domain.view import make_view
from polypilot_tui.domain.workspace import Isolation, Workspace
from polypilot_tui.engine.codec import encode
from polypilot_tui.engine.registry_sync import session_records
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.storage.registry import Registry
from tests.support.engine import Harness

COSTLY = "\ud800"
"""The costliest character as saved (six bytes: ``\\ud800``); a path may hold one (surrogateescape)."""
BIG = COSTLY * 3_000_000
"""An agent's text far past any limit (18 MB as saved)."""
GROWING = ("a_PAT=x\n", "a_KEY=''", "authorization:x ", "Bearer abcdefgh ", "x_TOKEN: y ")
"""Shapes the redactor replaces with something longer."""


def saved(value: object) -> int:
    """Bytes as written (the registry's and the stream's JSON)."""
    return len(dump_json(encode(value)).encode("utf-8"))


def prompt_of(size: int) -> str:
    """A prompt of ``size`` bytes as saved that the redactor grows the most."""
    unit = max(GROWING, key=lambda u: len(REDACTOR.text(u * 100)) / saved_bytes(u * 100))
    text = unit * (size // saved_bytes(unit))
    return text + "x" * (size - saved_bytes(text))


def full_session(sid: str, clock: FakeClock) -> Session:
    """A session at every limit: names and folders at theirs, a queue full, a prompt running
    and one interrupted, and an agent that says far too much everywhere it can."""
    session = Session(
        sid,
        COSTLY * NAME_CHARS,
        "a" * ID_CHARS,
        cwd=COSTLY * PATH_CHARS,
        model=BIG,
        agent_session_id="s" * ID_CHARS,
        title=BIG,
    )
    session.workspace = Workspace(
        COSTLY * PATH_CHARS, Isolation.WORKTREE, COSTLY * PATH_CHARS, COSTLY * REF_CHARS, COSTLY * REF_CHARS, "c" * 40
    )
    session.workspace_problem = session.sign_in = session.model_choice = BIG
    session.sandbox = Sandbox(SandboxMode.WORKSPACE, tuple(COSTLY * SANDBOX_HOST_CHARS for _ in range(SANDBOX_HOSTS)))
    session.interrupted_prompt = prompt_of(PROMPT_BYTES)
    each = QUEUE_BYTES // QUEUE_PROMPTS
    session.queue = [QueuedPrompt.of(prompt_of(each)) for _ in range(QUEUE_PROMPTS)]
    session.begin_turn(prompt_of(PROMPT_BYTES), clock.now())
    events = [
        AgentEvent(EventType.TURN_START, {}),
        AgentEvent(EventType.INTENT, {"intent": BIG}),
        AgentEvent(EventType.MESSAGE_DELTA, {"messageId": "m", "deltaContent": BIG}),
        *(AgentEvent(EventType.TOOL_START, {"toolCallId": f"t{i}", "toolName": BIG[:50_000]}) for i in range(40)),
        AgentEvent(
            EventType.PERMISSION_REQUESTED,
            {
                "requestId": "r" * ID_CHARS,
                "toolCallId": "t" * ID_CHARS,
                "title": BIG,
                "detail": BIG,
                "kind": BIG,
                "options": [
                    {"optionId": f"{i:04}" + "o" * (ID_CHARS - 4), "name": BIG, "kind": BIG} for i in range(99)
                ],
            },
        ),
    ]
    for event in events:
        apply_event(session, event, clock.now(), clock)
    return session


def failed_session(sid: str) -> Session:
    """A session whose last turn failed with an agent's error far past its limit."""
    session = Session(sid, "failed", "demo", lost=BIG)
    session.turns.append(TurnRecord(1, "x", Outcome.FAILED, BIG, 0.0, 1.0, 0, 0, BIG, (), EndCause.AGENT_ERROR))
    return session


def test_a_view_of_a_session_at_every_limit_fits_what_a_snapshot_carries_per_session() -> None:
    clock = FakeClock()
    busy, failed = full_session("s1", clock), failed_session("s2")
    for session in (busy, failed):
        view = make_view(session)
        assert saved(view) <= VIEW_BYTES, (session.id, saved(view))
    view = make_view(busy)
    assert view.queued == QUEUE_PROMPTS and view.queue[0].preview and not view.queue[-1].preview
    assert view.pending_permission is not None and len(view.pending_permission.options) == 8
    assert make_view(failed).reason.endswith("more characters not kept]")  # cut, and said


@pytest.mark.slow
async def test_a_registry_record_at_every_limit_fits_a_line_of_the_registry(harness: Harness) -> None:
    session = full_session("s1", harness.clock)
    harness.manager.adopt(session, restored=False)
    (record,) = session_records(harness.manager)
    assert len(record.queue) == QUEUE_PROMPTS and record.last_prompt and record.interrupted_prompt
    written = saved(REDACTOR.scrub(record).to_json())  # as the registry writes it
    assert written <= RECORD_BYTES
    assert written > 2 * (QUEUE_BYTES + 2 * PROMPT_BYTES)  # the redactor did grow it: the bound was exercised


@pytest.mark.slow
async def test_a_registry_of_every_session_at_its_limits_is_saved_and_read_back_whole(
    harness: Harness, tmp_path: Path
) -> None:
    """SESSIONS sessions, names, folders and agents' texts at their limits, HELD_BYTES of
    prompts among them: the file fits what the reader takes, and every session comes back."""
    full = full_session("s0", harness.clock)
    harness.manager.adopt(full, restored=False)
    (template,) = session_records(harness.manager)
    left = HELD_BYTES - full.held_prompt_bytes()
    second = ["x" * PROMPT_BYTES] * (left // PROMPT_BYTES)  # the rest (redacting shapes costs seconds a megabyte)
    records = [template]
    for i in range(1, SESSIONS):
        queue = tuple(second) if i == 1 else ()
        records.append(replace(template, id=f"s{i}", queue=queue, last_prompt="", interrupted_prompt=""))
    assert sum(saved_bytes(p) for r in records for p in (*r.queue, r.last_prompt, r.interrupted_prompt)) <= HELD_BYTES
    registry = Registry(tmp_path)
    registry.save(records, 1.0)
    size = registry.path.stat().st_size
    assert size <= REGISTRY_BYTES and size > REGISTRY_BYTES // 2
    again = Registry(tmp_path).load()
    assert again.problem == "" and [r.id for r in again.sessions] == [r.id for r in records]
    assert again.sessions[1].queue == tuple(REDACTOR.text(p) for p in second)


def test_the_redactor_grows_a_text_no_more_than_the_limits_allow() -> None:
    for unit in GROWING:
        text = unit * 1000
        assert saved_bytes(REDACTOR.text(text)) <= REDACTION_GROWTH * saved_bytes(text), unit


def test_a_text_costs_its_own_size_as_saved_whatever_else_the_file_holds() -> None:
    """One lone surrogate used to make the whole file ASCII-escaped: every CJK character of
    every other text then cost six bytes instead of three, past what the limits counted."""
    cjk = "中" * 1000
    assert saved_bytes(cjk) == 3000 and saved_bytes(COSTLY) == 6 and saved_bytes("a\nb") == 4
    document = dump_json({"agent's": COSTLY, "user's": cjk})
    assert cjk in document and len(document.encode()) == len(dump_json({"agent's": "", "user's": ""})) + 6 + 3000


def test_a_prompt_always_fits_a_row_and_an_agents_row_is_cut_with_a_count() -> None:
    assert ROW_CHARS >= PROMPT_BYTES  # a prompt of PROMPT_BYTES as saved has at most as many characters
    session = Session("s", "n", "demo")
    prompt = "p" * PROMPT_BYTES
    session.add_item(ItemKind.USER, prompt, 0.0)
    session.error(BIG, 0.0)
    assert session.history[0].text == prompt
    kept = session.history[1].text
    said = re.search(r"…\n\[([\d,]+) more characters not kept\]$", kept)
    assert said is not None and len(kept) <= ROW_CHARS + CUT_NOTE_CHARS
    start = kept[: said.start()]
    assert BIG.startswith(start) and len(start) + int(said.group(1).replace(",", "")) == len(BIG)


def test_a_cut_through_a_secret_leaves_none_of_it_once_redacted() -> None:
    """The cut is marked by "…" right where it is: the redactor removes the start of a known
    secret cut through there (a marker a line later left its first characters on disk)."""
    secret = "k3y-" + "Z9" * 20
    REDACTOR.learn([secret])
    limit = 4 * CUT_NOTE_CHARS
    for at in range(limit - CUT_NOTE_CHARS - 30, limit - CUT_NOTE_CHARS):
        cut = bounded("a" * at + secret + "b" * 1000, limit)
        assert secret[:6] in cut or at + 6 > limit - CUT_NOTE_CHARS  # the cut goes through the secret
        assert not any(secret[i : i + 6] in REDACTOR.text(cut) for i in range(len(secret) - 5)), at
    gathered = Gathered(limit)
    gathered.add("a" * (limit - 10) + secret)
    assert secret[:6] not in REDACTOR.text(gathered.take())
