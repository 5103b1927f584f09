"""One prompt to many sessions, and one task tried by many agents side by side.

Broadcast sends one prompt to sessions that exist; a fan-out makes a session per attempt,
each in a worktree of its own from the same base, and remembers them as a group so they can
be compared (status, time, usage, diff stats, the check command's result) and one picked.
Pure data and parsing: the engine (engine/fan_out.py) does the work.
"""

from __future__ import annotations

from typing import Literal

from polypilot_tui.domain.changeset import ChangeStats
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.usage import Usage

MAX_ATTEMPTS = 8
"""Attempts one fan-out makes at most (each is an agent process and a worktree)."""
MAX_BROADCAST = 100
"""Sessions one broadcast reaches at most."""
MAX_CHECK_CHARS = 4096
"""Characters of a check command."""
CHECK_OUTPUT_BYTES = 64 * 1024
"""Bytes of a check's output kept (its last ones: a test run says what failed at its end)."""
CHECK_TIMEOUT = 600.0
"""Seconds a check runs at most before it is killed (its process group)."""

BroadcastOutcome = Literal["sent", "queued", "refused"]


@dataclass(frozen=True)
class BroadcastResult:
    """What became of a broadcast prompt in one session."""

    session_id: str
    result: BroadcastOutcome
    reason: str = ""
    """Why it was refused ("" otherwise), in the engine's words."""


@dataclass(frozen=True)
class CheckResult:
    """How the check command went in one attempt's worktree."""

    exit_code: int | None
    """None: it did not end by itself (timed out and killed, or could not start)."""
    output: str
    """Its stdout and stderr, interleaved as written; the last :data:`CHECK_OUTPUT_BYTES` only."""
    seconds: float
    truncated: bool = False
    """Earlier output was left out (``output`` begins with a line saying how much)."""
    timed_out: bool = False
    error: str = ""
    """Why it could not run ("" when it ran)."""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def verdict(self) -> str:
        """ "could not run", "timed out", "passed" or "failed": what every surface says first."""
        if self.timed_out:  # killed at its timeout (its error says after how long)
            return "timed out"
        if self.error:
            return "could not run"
        return "passed" if self.passed else "failed"


@dataclass(frozen=True)
class Attempt:
    """One attempt of a fan-out, as the compare view shows it."""

    session_id: str
    name: str
    agent: str
    status: str
    """Its session's status now (``SessionStatus``'s value; "closed" when the session is gone)."""
    outcome: str
    """How its task's turn ended (``Outcome``'s value; "" while it runs)."""
    seconds: float
    """From the task's send to its turn's end (or to now while it runs)."""
    usage: Usage
    changes: ChangeStats
    check: CheckResult | None
    reason: str = ""
    """Why its turn ended so ("" while it runs)."""
    branch: str = ""
    folder: str = ""
    """Its worktree."""
    checking: bool = False
    """Its check runs now."""
    discarded: bool = False
    """Its worktree and branch were removed (by a pick)."""
    refused: tuple[str, ...] = ()
    """The permission requests refused during its turn (their titles)."""


@dataclass(frozen=True)
class Comparison:
    """A fan-out's attempts side by side."""

    group: str
    task: str
    check: str
    attempts: tuple[Attempt, ...]
    base: str = ""
    """The branch every attempt started from (and the one a pick merges into)."""
    repo: str = ""
    picked: str = ""
    """The attempt merged ("" until one is)."""

    @property
    def ended(self) -> bool:
        """Every attempt's task turn has ended."""
        return all(attempt.outcome for attempt in self.attempts)


@dataclass(frozen=True)
class Discarded:
    """What became of one other attempt when a pick discarded the rest."""

    session_id: str
    discarded: bool
    message: str
    """What was removed, or the work at risk that kept it (nothing removed then)."""


class FanOutSpecError(ValueError):
    """A fan-out written wrong (``copilot:0``, ``:2``, ``copilot:x``)."""


def parse_fan_out(spec: str) -> tuple[str, ...]:
    """``copilot:2,opencode:1`` as one agent per attempt: ``("copilot", "copilot", "opencode")``.

    ``agent`` alone is one attempt. FanOutSpecError names the part that is wrong."""
    agents: list[str] = []
    parts = [part.strip() for part in spec.split(",")]
    if not spec.strip():
        raise FanOutSpecError("name the agents, e.g. copilot:2,opencode:1")
    for part in parts:
        name, sep, count_text = part.partition(":")
        name = name.strip()
        if not name:
            raise FanOutSpecError(f"{part!r} names no agent (write AGENT or AGENT:COUNT, e.g. copilot:2)")
        count = 1
        if sep:
            count_text = count_text.strip()
            if not count_text.isdecimal() or not count_text.isascii():
                raise FanOutSpecError(f"{part!r}: the count after ':' must be a whole number (e.g. {name}:2)")
            count = int(count_text)
            if count < 1:
                raise FanOutSpecError(f"{part!r}: the count must be 1 or more")
        agents += [name] * min(count, MAX_ATTEMPTS + 1)
        if len(agents) > MAX_ATTEMPTS:
            raise FanOutSpecError(f"{spec!r} asks for more than {MAX_ATTEMPTS} attempts, the most one fan-out makes")
    return tuple(agents)


def spec_of(agents: tuple[str, ...]) -> str:
    """``("copilot", "copilot", "opencode")`` as ``copilot:2,opencode:1`` (first-seen order)."""
    counts: dict[str, int] = {}
    for agent in agents:
        counts[agent] = counts.get(agent, 0) + 1
    return ",".join(f"{agent}:{n}" for agent, n in counts.items())


@dataclass(frozen=True)
class AttemptRecord:
    """What the engine keeps of one attempt (the rest it reads from the session)."""

    session_id: str
    agent: str
    started_wall: float = 0.0
    """When its task was sent (wall clock: kept across a restart); 0 before."""
    ended_wall: float | None = None
    """When its task's turn ended (None while it runs)."""
    outcome: str = ""
    reason: str = ""
    cause: str = ""
    """What ended it (``EndCause``'s value): one the app's stop caused is not the attempt's own
    end, and the turn of its resent prompt ends it again."""
    refused: tuple[str, ...] = ()
    """The permission requests refused during its turn (their titles)."""
    check: CheckResult | None = None
    discarded: bool = False
    """Its worktree and branch were removed (by a pick)."""


@dataclass(frozen=True)
class Group:
    """A fan-out as the engine keeps it (a line of its groups file)."""

    group: str
    task: str
    check: str
    repo: str
    base: str
    created_wall: float
    attempts: tuple[AttemptRecord, ...]
    check_timeout: float = CHECK_TIMEOUT
    picked: str = ""

    def attempt(self, session_id: str) -> AttemptRecord | None:
        return next((a for a in self.attempts if a.session_id == session_id), None)
