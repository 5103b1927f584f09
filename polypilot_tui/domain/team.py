"""A team: an orchestrator session, the workers it started, and one budget for the whole tree.

Pure bookkeeping on the engine's clock (no I/O): the engine's desk (engine/teams.py) asks a
:class:`Team` whether a start or a send may go, tells it what happened (a worker's turn began,
waits for a permission, ended; usage grew), and does what it answers. A bound reached is a
:class:`Refusal` that names the bound and the numbers ("total workers: 6 of 6"); an
orchestrator that dispatches the same work again and again is stopped as stalled.

The budget is reserved when a worker starts (a slot of ``workers_at_once``, one of
``total_workers``) and the slot released when its turn ends; turns, tokens and cost are
counted as the tree's sessions report them. Wall time runs while the engine runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, field
from typing import Any, Literal, Protocol, get_args

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.usage import Usage, usage_from_plain

LinkState = Literal["queued", "starting", "working", "blocked", "done", "stopped", "failed"]
"""Where a worker is, as its orchestrator sees it."""
LINK_STATES: tuple[LinkState, ...] = get_args(LinkState)
ENDED: frozenset[LinkState] = frozenset({"done", "stopped", "failed"})
"""A worker in one of these has no turn in flight nor one waiting for a slot."""
WaitUntil = Literal["done", "blocked", "any"]
"""What a wait for workers waits for (:func:`reached` says when it is over)."""
WAIT_UNTIL: tuple[WaitUntil, ...] = get_args(WaitUntil)
STALL_REPEATS = 3
"""The same dispatch this many times: the orchestration is stopped as stalled."""
MAX_BOUND = 1_000_000
"""Beyond any sensible bound (a bigger one is a typo, not a budget)."""


@dataclass(frozen=True)
class TeamBounds:
    """What the whole tree may spend: workers, depth, turns, wall time, tokens and cost."""

    workers_at_once: int = 2
    """Workers with a turn in flight at once; more starts wait in a FIFO queue."""
    total_workers: int = 6
    """Workers started over the orchestration's life (a queued one counts)."""
    depth: int = 1
    """How deep the tree goes: 1 = workers cannot orchestrate, 2 = their workers cannot…"""
    turns: int = 40
    """Turns ended across the tree (the orchestrator's own included)."""
    wall_seconds: float = 3600.0
    """Seconds the orchestration may run (while the engine runs)."""
    tokens: int | None = None
    """Input and output tokens across the tree, as the agents report them (None: unbounded)."""
    cost: float | None = None
    """Money across the tree, as the agents report it (None: unbounded)."""

    def problem(self) -> str:
        """Why these bounds cannot be used ("" when they can)."""
        counts = {
            "workers at once": self.workers_at_once,
            "total workers": self.total_workers,
            "depth": self.depth,
            "turns": self.turns,
        }
        for name, value in counts.items():
            if type(value) is not int or not 1 <= value <= MAX_BOUND:
                return f"{name} must be a whole number from 1 to {MAX_BOUND:,} (got {value!r})"
        if not _positive(self.wall_seconds):
            return f"wall seconds must be a number above 0 (got {self.wall_seconds!r})"
        if self.tokens is not None and (type(self.tokens) is not int or self.tokens < 1):
            return f"tokens must be a whole number above 0, or none (got {self.tokens!r})"
        if self.cost is not None and not _positive(self.cost):
            return f"cost must be a number above 0, or none (got {self.cost!r})"
        return ""


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and type(value) is not bool and math.isfinite(value) and value > 0


@dataclass(frozen=True)
class Refusal:
    """A bound reached: which one and the numbers, for the orchestrator and the dashboard."""

    bound: str
    """"total workers", "depth", "turns", "wall time", "tokens", "cost", "stalled", or "stopped"
    (the orchestration was stopped before: ``used`` says why)."""
    used: str
    limit: str

    @property
    def words(self) -> str:
        if self.bound == "stalled":
            return f"stopped: the same dispatch {self.limit} times"
        if self.bound == "stopped":
            return self.used  # the words of what stopped it
        return f"{self.bound}: {self.used} of {self.limit}"


@dataclass
class Link:
    """One worker of the team: its session, where it is, and how its last turn ended."""

    worker: str
    """Its session id."""
    parent: str
    """The session that started it (the orchestrator, or a worker one level up)."""
    depth: int
    """1 for a worker of the orchestrator, 2 for a worker's worker…"""
    name: str
    agent: str
    state: LinkState = "queued"
    outcome: str = ""
    reason: str = ""
    turns: int = 0
    """Its turns ended since it joined the team."""
    started_at: float | None = None
    """When its first turn was sent (clock seconds); None while queued."""
    ended_at: float | None = None
    """When its last turn ended (clock seconds); None while it works."""
    holds_slot: bool = False
    """It holds one of ``workers_at_once`` (from its send to its turn's end)."""
    usage: Usage = field(default_factory=Usage)
    """What it reported using, as last seen."""
    stopping: str = ""
    """Why it is being stopped (its orchestrator, the human, a bound): its stopped turn says so."""

    @property
    def ended(self) -> bool:
        return self.state in ENDED


@dataclass(frozen=True)
class Pending:
    """A start or a send waiting for a slot of ``workers_at_once``."""

    worker: str
    prompt: str


@dataclass(frozen=True)
class Wait:
    """An orchestrator waiting for workers (kept so a restart can still answer it)."""

    key: str
    waiter: str
    """The session that waits (the orchestrator or a worker that orchestrates)."""
    workers: tuple[str, ...]
    until: str


def fold_prompt(prompt: str) -> str:
    """A prompt as the stall check compares it: whitespace runs as one space, case folded."""
    return " ".join(prompt.split()).casefold()


class Stated(Protocol):
    """Anything with a worker's state: a Link, or a WorkerState as the relay gets it."""

    @property
    def state(self) -> LinkState: ...


def reached(links: Iterable[Stated], until: str) -> bool:
    """Whether a wait for ``links`` until ``until`` ("done" | "blocked" | "any") is over.

    done: every one has ended; blocked: every one has ended or one is blocked on a permission;
    any: one has ended or is blocked. No links: over at once."""
    states = [link.state for link in links]
    if not states:
        return True
    every_ended = all(state in ENDED for state in states)
    if until == "done":
        return every_ended
    if until == "blocked":
        return every_ended or "blocked" in states
    return any(state in ENDED or state == "blocked" for state in states)


@dataclass
class Team:
    """An orchestration: its orchestrator, its workers, its budget, its queue and its waits."""

    orchestrator: str
    bounds: TeamBounds
    started_at: float
    """When it began (clock seconds; after a restart: now less the seconds already run)."""
    links: dict[str, Link] = field(default_factory=dict)
    queue: list[Pending] = field(default_factory=list)
    waits: dict[str, Wait] = field(default_factory=dict)
    turns: int = 0
    """Turns ended across the tree since it began."""
    baseline: Usage = field(default_factory=Usage)
    """The orchestrator's usage when it began (what it used before is not this team's)."""
    orchestrator_usage: Usage = field(default_factory=Usage)
    dispatches: dict[str, int] = field(default_factory=dict)
    """How often each (agent, folded prompt) was dispatched."""
    reserved: int = 0
    """Workers let through whose sessions are being made (they count toward the total)."""
    stopped: str = ""
    """Why the orchestration was stopped ("" while it runs): a bound crossed, a stall."""
    note: str = ""
    """The last bound reached or stall, in words, for the dashboard ("" for none)."""

    # ---- what is spent -----------------------------------------------------------------
    def running(self) -> int:
        """Workers holding a slot of ``workers_at_once``."""
        return sum(1 for link in self.links.values() if link.holds_slot)

    def tokens(self) -> int:
        spent = self.orchestrator_usage.total_tokens - self.baseline.total_tokens
        return max(0, spent) + sum(link.usage.total_tokens for link in self.links.values())

    def cost(self) -> float:
        spent = (self.orchestrator_usage.cost or 0.0) - (self.baseline.cost or 0.0)
        return max(0.0, spent) + sum(link.usage.cost or 0.0 for link in self.links.values())

    def elapsed(self, now: float) -> float:
        return max(0.0, now - self.started_at)

    def depth_of(self, session_id: str) -> int:
        """0 for the orchestrator, a worker's depth, -1 for a session not in the tree."""
        if session_id == self.orchestrator:
            return 0
        link = self.links.get(session_id)
        return link.depth if link is not None else -1

    def members(self) -> tuple[str, ...]:
        return (self.orchestrator, *self.links)

    def workers_of(self, parent: str) -> tuple[Link, ...]:
        """The workers ``parent`` started, oldest first."""
        return tuple(link for link in self.links.values() if link.parent == parent)

    # ---- the bounds --------------------------------------------------------------------
    def spent_bound(self, now: float) -> Refusal | None:
        """A bound the tree has used up (turns, wall time, tokens, cost), or None."""
        b = self.bounds
        if self.turns >= b.turns:
            return Refusal("turns", str(self.turns), str(b.turns))
        if self.elapsed(now) >= b.wall_seconds:
            return Refusal("wall time", _seconds(self.elapsed(now)), _seconds(b.wall_seconds))
        if b.tokens is not None and self.tokens() >= b.tokens:
            return Refusal("tokens", f"{self.tokens():,}", f"{b.tokens:,}")
        if b.cost is not None and self.cost() >= b.cost:
            return Refusal("cost", f"{self.cost():.2f}", f"{b.cost:.2f}")
        return None

    def refuse_dispatch(self, starter: str, agent: str, prompt: str, now: float, new: bool) -> Refusal | None:
        """Why ``starter`` may not start a worker (``new``) or send to one now, or None.

        A dispatch that is let through is counted for the stall check; the third of the same
        (agent, prompt) stops the orchestration as stalled, and is itself refused."""
        if self.stopped:
            return Refusal("stopped", self.stopped, "")
        if new:
            depth = self.depth_of(starter)
            if depth >= self.bounds.depth:
                return Refusal("depth", str(depth + 1), str(self.bounds.depth))
            started = len(self.links) + self.reserved
            if started >= self.bounds.total_workers:
                return Refusal("total workers", str(started), str(self.bounds.total_workers))
        spent = self.spent_bound(now)
        if spent is not None:
            return spent
        key = f"{agent}\n{fold_prompt(prompt)}"
        count = self.dispatches.get(key, 0) + 1
        if count >= STALL_REPEATS:
            stall = Refusal("stalled", str(count), str(STALL_REPEATS))
            self.stop(stall)
            return stall
        self.dispatches[key] = count
        return None

    def stop(self, why: Refusal) -> None:
        """The orchestration stops: no more starts or sends; what waits for a slot is dropped."""
        self.stopped = self.note = why.words
        for pending in self.queue:
            link = self.links.get(pending.worker)
            if link is not None and link.state == "queued":
                link.state, link.reason = "stopped", why.words
        self.queue.clear()

    # ---- the queue -----------------------------------------------------------------
    def has_slot(self) -> bool:
        return self.running() < self.bounds.workers_at_once

    def at_once_note(self) -> str:
        return f"workers at once: {self.running()} of {self.bounds.workers_at_once} — start queued"

    def next_pending(self) -> Pending | None:
        """The oldest start or send waiting, when a slot is free (taken off the queue)."""
        if self.stopped or not self.queue or not self.has_slot():
            return None
        return self.queue.pop(0)

    # ---- what happened -----------------------------------------------------------------
    def sent(self, worker: str, now: float) -> None:
        """A turn of ``worker`` goes out: it holds a slot until the turn ends."""
        link = self.links[worker]
        link.state, link.outcome, link.reason, link.ended_at = "starting", "", "", None
        link.holds_slot = True
        if link.started_at is None:
            link.started_at = now

    def turn_ended(self, session_id: str, outcome: str, reason: str, now: float, more_queued: bool) -> None:
        """A turn of a session of the tree ended (``more_queued``: the session sends another)."""
        self.turns += 1
        link = self.links.get(session_id)
        if link is None:
            return
        link.turns += 1
        if outcome == "aborted" and link.stopping:
            reason = link.stopping
        link.stopping = ""
        link.outcome, link.reason = outcome, reason
        if more_queued and outcome == "completed":
            return
        link.state = _LINK_END.get(outcome, "failed")
        link.ended_at = now
        link.holds_slot = False

    def not_sent(self, worker: str, reason: str, now: float) -> None:
        """A turn of ``worker`` could not be sent (no turn ran): it failed, its slot is free."""
        link = self.links[worker]
        link.state, link.outcome, link.reason, link.ended_at = "failed", "failed", reason, now
        link.holds_slot = False

    def blocked(self, worker: str, on_permission: bool, busy: bool) -> bool:
        """A worker's session changed: blocked on a permission, working, or neither; True when
        its state changed."""
        link = self.links.get(worker)
        if link is None or link.state in ENDED or link.state == "queued":
            return False
        new: LinkState = "blocked" if on_permission else "working" if busy else link.state
        if new == link.state:
            return False
        link.state = new
        return True

    def stopped_worker(self, worker: str, reason: str, now: float) -> None:
        """A worker was stopped (by its orchestrator, a bound, a close) before its turn ended."""
        link = self.links[worker]
        self.queue = [p for p in self.queue if p.worker != worker]
        if link.state not in ENDED:
            link.state, link.reason, link.ended_at = "stopped", reason, now
        link.holds_slot = False

    # ---- saved form ----------------------------------------------------------------------
    def to_json(self, now: float) -> dict[str, Any]:
        """Plain JSON (times as seconds run, not clock readings: the clock starts anew)."""
        return {
            "orchestrator": self.orchestrator,
            "bounds": asdict(self.bounds),
            "elapsed": self.elapsed(now),
            "links": [_link_json(link, now) for link in self.links.values()],
            "queue": [asdict(p) for p in self.queue],
            "waits": [asdict(w) for w in self.waits.values()],
            "turns": self.turns,
            "baseline": self.baseline.to_json() | {"cost_mark": self.baseline.cost_mark},
            "dispatches": dict(self.dispatches),
            "stopped": self.stopped,
            "note": self.note,
        }


_LINK_END: Mapping[str, LinkState] = {"completed": "done", "recovered": "done", "aborted": "stopped"}


def _link_json(link: Link, now: float) -> dict[str, Any]:
    data = asdict(link)
    data.pop("usage")
    data.pop("stopping")
    data["started_ago"] = None if link.started_at is None else now - link.started_at
    data["ended_ago"] = None if link.ended_at is None else now - link.ended_at
    data.pop("started_at")
    data.pop("ended_at")
    return data


def _seconds(value: float) -> str:
    return f"{value:.0f} s"


def team_from_json(obj: Any, now: float) -> Team:
    """A team :meth:`Team.to_json` wrote; ValueError naming what is wrong on any other shape."""
    if not isinstance(obj, Mapping):
        raise ValueError("a team must be an object")
    orchestrator = _text(obj, "orchestrator")
    bounds_obj = obj.get("bounds")
    if not isinstance(bounds_obj, Mapping):
        raise ValueError("bounds: expected an object")
    try:
        bounds = TeamBounds(**{k: v for k, v in bounds_obj.items() if k in TeamBounds.__dataclass_fields__})
    except TypeError as exc:
        raise ValueError(f"bounds: {exc}") from None
    if bounds.problem():
        raise ValueError(f"bounds: {bounds.problem()}")
    elapsed = _number(obj.get("elapsed"), "elapsed")
    team = Team(orchestrator, bounds, now - elapsed)
    for item in _list(obj, "links"):
        link = _link_from_json(item, now)
        team.links[link.worker] = link
    for item in _list(obj, "queue"):
        if not isinstance(item, Mapping):
            raise ValueError("queue: expected objects")
        team.queue.append(Pending(_text(item, "worker"), _text(item, "prompt")))
    for item in _list(obj, "waits"):
        if not isinstance(item, Mapping):
            raise ValueError("waits: expected objects")
        workers = item.get("workers")
        if not isinstance(workers, list) or not all(isinstance(w, str) for w in workers):
            raise ValueError("waits: workers must be a list of ids")
        wait = Wait(_text(item, "key"), _text(item, "waiter"), tuple(workers), _text(item, "until"))
        team.waits[wait.key] = wait
    turns = obj.get("turns")
    team.turns = turns if type(turns) is int and turns >= 0 else 0
    team.baseline = team.orchestrator_usage = usage_from_plain(obj.get("baseline"))
    dispatches = obj.get("dispatches")
    if isinstance(dispatches, Mapping):
        team.dispatches = {str(k): v for k, v in dispatches.items() if type(v) is int}
    team.stopped = obj.get("stopped") if isinstance(obj.get("stopped"), str) else ""  # type: ignore[assignment]
    team.note = obj.get("note") if isinstance(obj.get("note"), str) else ""  # type: ignore[assignment]
    return team


def _link_from_json(item: Any, now: float) -> Link:
    if not isinstance(item, Mapping):
        raise ValueError("links: expected objects")
    state = item.get("state")
    if state not in LINK_STATES:
        raise ValueError(f"links: state {state!r} is not one of {', '.join(LINK_STATES)}")
    depth = item.get("depth")
    if type(depth) is not int or depth < 1:
        raise ValueError("links: depth must be a whole number from 1")
    started, ended = item.get("started_ago"), item.get("ended_ago")
    return Link(
        _text(item, "worker"),
        _text(item, "parent"),
        depth,
        _text(item, "name"),
        _text(item, "agent"),
        state,
        _text(item, "outcome"),
        _text(item, "reason"),
        item["turns"] if type(item.get("turns")) is int else 0,
        None if started is None else now - _number(started, "started_ago"),
        None if ended is None else now - _number(ended, "ended_ago"),
        item.get("holds_slot") is True,
    )


def _text(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected text")
    return value


def _number(value: Any, key: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{key}: expected a number from 0")
    return float(value)


def _list(obj: Mapping[str, Any], key: str) -> list[Any]:
    value = obj.get(key, [])
    if not isinstance(value, list):
        raise ValueError(f"{key}: expected a list")
    return value
