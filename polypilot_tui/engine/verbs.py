"""Every engine verb, declared once: its request, its reply, its route, its errors, its command.

A front end drives an engine through one door, ``await engine.call(verb, request)``, whether
the engine runs in this process (:class:`~polypilot_tui.engine.local.LocalEngine`, whose method
named like the verb answers it) or in another one (the service's routes are built from
:data:`VERBS`; its one client, ``service/client.py``, sends any verb the same way). The
command line's subcommands and the API document's table are checked against this list
(tests/unit/test_verbs.py), so adding a verb is: a :class:`Verb` here, the engine's method,
and its UI.

Pure data: no I/O. Reads a front end answers from what the engine last said (views,
histories, the reply streaming now, the record stream) are not verbs: they are
:class:`~polypilot_tui.engine.api.Engine`'s own methods.
"""

from __future__ import annotations

from typing import Any, Literal

from polypilot_tui.domain.agents import AgentOffer
from polypilot_tui.domain.changeset import ChangeStats, FileCount
from polypilot_tui.domain.chat import ChatItem
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.fan_out import CHECK_TIMEOUT, BroadcastResult, Comparison, Discarded
from polypilot_tui.domain.model_choice import ModelChoices
from polypilot_tui.domain.sandbox import Sandbox
from polypilot_tui.domain.team import LinkState, TeamBounds, WaitUntil
from polypilot_tui.domain.view import SessionDetails, SessionView
from polypilot_tui.domain.workspace import FolderInfo, Isolation, MergeResult, WorktreeState
from polypilot_tui.engine.api import EngineError, ReadingGone, UnknownCapability, UnknownGroup, UnknownSession, Verb

API_VERSION = 2
"""The version of the engine API this code speaks (``/v1``); a fleet tells a host of another apart.
2: sessions may be sandboxed (an engine of 1 would drop the request's ``sandbox`` unsaid), and
an engine refuses a request field it does not know."""
HISTORY_PAGE = 1000
"""Rows one history page holds at most."""
DIFF_PAGE = 1 << 20
"""Characters of a diff one page holds at most."""
MAX_FOLDERS = 200
"""Sub-folders one listing names at most."""
MAX_STAT_FILES = 10_000
"""Files a diff's stat lists (the rest are counted in its totals)."""


# ---- requests ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class NoArgs:
    """A verb of the engine as a whole."""


@dataclass(frozen=True)
class SessionRef:
    """A verb of one session, with nothing more to say."""

    session_id: str


@dataclass(frozen=True)
class NewSession:
    """A new session of ``agent``."""

    agent: str
    name: str | None = None
    """None: the agent's name and a number."""
    folder: str | None = None
    """Where it works, on the engine's machine: absolute, or under ``~`` (that machine's home).
    None: the agent's own folder (the agents file's ``cwd``)."""
    isolation: Isolation = Isolation.FOLDER
    """In the folder as it is, or in a new worktree of its repository made for it."""
    branch: str = ""
    """The worktree's new branch ("": ``polypilot/<name>``)."""
    base: str = ""
    """Where the worktree's branch starts ("": the branch checked out there)."""
    sandbox: Sandbox | None = None
    """The sandbox its agent runs in (None: the agent's own, from the agents file)."""


@dataclass(frozen=True)
class FolderRef:
    """A folder on the engine's machine."""

    path: str
    """Absolute, or under ``~``, on the engine's machine."""


@dataclass(frozen=True)
class FolderQuery:
    """The sub-folders of a folder on the engine's machine."""

    path: str
    """Absolute, or under ``~``, on the engine's machine."""
    prefix: str = ""
    """Only the sub-folders whose names begin so (hidden ones only when it begins with a dot)."""


@dataclass(frozen=True)
class Send:
    """A prompt for a session (queued while it works)."""

    session_id: str
    prompt: str


@dataclass(frozen=True)
class Unqueue:
    """A queued prompt taken back."""

    session_id: str
    index: int
    expected: str | None = None
    """The key of the prompt the user saw at ``index`` (a view's ``QueueEntry.key``: the queue
    may have moved on since)."""


@dataclass(frozen=True)
class AnswerPermission:
    """The user's option for a permission request."""

    session_id: str
    request_id: str
    option_id: str


@dataclass(frozen=True)
class Rename:
    """A session's new name."""

    session_id: str
    name: str


@dataclass(frozen=True)
class Reopen:
    """A closed session opened again."""

    session_id: str
    position: int | None = None
    """Where it goes in the list (None: where it was)."""


@dataclass(frozen=True)
class SetModel:
    """The model a session's next turns use."""

    session_id: str
    model: str


@dataclass(frozen=True)
class HistoryRange:
    """A page of a session's rows."""

    session_id: str
    start: int = 0
    limit: int = 200
    """At most :data:`HISTORY_PAGE`."""


@dataclass(frozen=True)
class DiffRange:
    """A page of a session's diff."""

    session_id: str
    start: int = 0
    """The first character of the page, in the whole diff."""
    reading: str = ""
    """The reading the page is of ("" at 0: the diff is read now, a new reading)."""


@dataclass(frozen=True)
class Commit:
    """A session's worktree changes committed."""

    session_id: str
    message: str


@dataclass(frozen=True)
class Merge:
    """A session's worktree branch merged into its base."""

    session_id: str
    fast_forward_only: bool = False


@dataclass(frozen=True)
class Push:
    """A session's worktree branch pushed."""

    session_id: str
    remote: str = "origin"


@dataclass(frozen=True)
class PullRequest:
    """A pull request opened for a session's worktree branch."""

    session_id: str
    title: str = ""
    """"" for the drafted commit message's subject (and its body, when ``body`` is "")."""
    body: str = ""


@dataclass(frozen=True)
class Discard:
    """A session's worktree and branch removed."""

    session_id: str
    force: bool = False
    """Even with work at risk (uncommitted, untracked or ignored files, commits not merged
    nor pushed); without it the discard is refused, naming that work."""


@dataclass(frozen=True)
class Focus:
    """Which client's terminal has the focus."""

    client: int
    """The stream client whose terminal has the focus (its snapshot said its number)."""


# ---- replies ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EngineInfo:
    """Who the engine is and how busy."""

    pid: int
    state_dir: str
    started_at: float
    """Wall-clock epoch seconds."""
    now: float
    """The engine's clock: the times in its views are read against it."""
    wall: float
    sessions: int
    running_turns: int
    persistent: bool
    keepalive: float = 15.0
    """Seconds its stream stays silent at most (a comment line when it has nothing to say)."""
    attached: int = 0
    """Clients following its stream."""
    api: int = 1
    """The version of the API it speaks (:data:`API_VERSION` of its code; engines from before
    the field spoke 1). A fleet refuses a host whose engine speaks another."""


@dataclass(frozen=True)
class SessionList:
    """Every session's view, at the engine's time ``now``."""

    now: float
    sessions: tuple[SessionView, ...]


@dataclass(frozen=True)
class HistoryPage:
    """Rows ``start`` onwards of a session's ``total``."""

    total: int
    start: int
    items: tuple[ChatItem, ...]


@dataclass(frozen=True)
class DiffPage:
    """A page of a session's diff against its base, as git prints it."""

    reading: str
    """This reading of the diff: its later pages are asked of it (it is kept until they are)."""
    start: int
    total: int
    """Characters of the whole diff."""
    text: str
    """At most :data:`DIFF_PAGE` characters from ``start`` (pages split lines: join them)."""
    untracked: tuple[str, ...] = ()
    """The new files git does not track whose part begins on this page."""
    base: str = ""
    """What the diff is against, as people read it (a branch, else a commit)."""
    truncated: bool = False
    """The diff is larger than the engine reads: the rest is left out."""


@dataclass(frozen=True)
class DiffStat:
    """A session's changes a line per file (at most :data:`MAX_STAT_FILES`), and the totals."""

    files: tuple[FileCount, ...]
    more: int
    """Files changed beyond those listed."""
    total: ChangeStats


@dataclass(frozen=True)
class FinishState:
    """What finishing a session's worktree would have to care about, and what cannot be done
    where the engine runs."""

    worktree: WorktreeState
    pull_request: str = ""
    """Why a pull request cannot be opened there ("" when it can)."""


@dataclass(frozen=True)
class FolderListing:
    """Sub-folders of a folder on the engine's machine, by name (at most :data:`MAX_FOLDERS`)."""

    folder: str
    """The folder listed, absolute with symlinks resolved."""
    names: tuple[str, ...]
    more: bool = False
    """More were there (or not all were looked at): type more of a name."""


SendResult = Literal["sent", "queued"]

# ---- the verbs ------------------------------------------------------------------------------
_S = "/sessions/{session_id}"
_GONE = (UnknownSession, EngineError)

ENGINE_INFO: Verb[NoArgs, EngineInfo] = Verb(
    "engine_info", "GET", "/engine", NoArgs, EngineInfo, "who the engine is and how busy", command="engine", wrap=None
)
ENGINE_STOP: Verb[NoArgs, bool] = Verb(
    "engine_stop",
    "POST",
    "/engine/stop",
    NoArgs,
    bool,
    "the engine ends (turns in flight end as interrupted, offered for resending)",
    command="engine",
    wrap="stopping",
    status=202,
)
FOCUS_CLIENT: Verb[Focus, None] = Verb(
    "focus_client",
    "POST",
    "/clients/{client}/focus",
    Focus,
    None,
    "this client's terminal has the focus: attention alerts go there",
)
AGENTS: Verb[NoArgs, tuple[AgentOffer, ...]] = Verb(
    "agents",
    "GET",
    "/agents",
    NoArgs,
    tuple[AgentOffer, ...],
    "the agents it offers, and whether each can start where it runs",
    wrap="agents",
)
SESSIONS: Verb[NoArgs, SessionList] = Verb(
    "sessions",
    "GET",
    "/sessions",
    NoArgs,
    SessionList,
    "every session's view, in the sidebar's order",
    command="ls",
    wrap=None,
)
NEW_SESSION: Verb[NewSession, str] = Verb(
    "new_session",
    "POST",
    "/sessions",
    NewSession,
    str,
    "adds a session in a folder there, or in a new worktree of it made now (its agent connects in the "
    "background); its id",
    errors=(EngineError,),
    command="new",
    wrap="id",
    status=201,
)
CHECK_NEW_SESSION: Verb[NewSession, None] = Verb(
    "check_new_session",
    "POST",
    "/sessions/check",
    NewSession,
    None,
    "whether that session can be added (refused saying why), making nothing",
    errors=(EngineError,),
)
INSPECT_FOLDER: Verb[FolderRef, FolderInfo] = Verb(
    "inspect_folder",
    "GET",
    "/folders/inspect",
    FolderRef,
    FolderInfo,
    "what a folder there is: in git or not, its repository, branch, and uncommitted changes",
    errors=(EngineError,),
    wrap=None,
)
LIST_FOLDERS: Verb[FolderQuery, FolderListing] = Verb(
    "list_folders",
    "GET",
    "/folders",
    FolderQuery,
    FolderListing,
    f"the sub-folders of a folder there whose names begin with the prefix (at most {MAX_FOLDERS}), nothing else",
    errors=(EngineError,),
    wrap=None,
)
SESSION_VIEW: Verb[SessionRef, SessionView] = Verb(
    "session_view", "GET", _S, SessionRef, SessionView, "the session's view", errors=(UnknownSession,), wrap=None
)
HISTORY_PAGE_OF: Verb[HistoryRange, HistoryPage] = Verb(
    "history_page",
    "GET",
    _S + "/history",
    HistoryRange,
    HistoryPage,
    f"a page of its history rows (at most {HISTORY_PAGE})",
    errors=_GONE,
    command="follow",
    wrap=None,
)
DETAILS: Verb[SessionRef, SessionDetails] = Verb(
    "details",
    "GET",
    _S + "/details",
    SessionRef,
    SessionDetails,
    "agent, command, folders, logs, the last stderr lines, plan",
    errors=(UnknownSession,),
    wrap=None,
)
SEND: Verb[Send, SendResult] = Verb(
    "send",
    "POST",
    _S + "/send",
    Send,
    SendResult,
    "sends, or queues while a turn runs; refused when it cannot be kept whole (400, naming the limit)"
    " or its folder is gone (nothing is queued)",
    errors=_GONE,
    command="send",
)
STOP: Verb[SessionRef, None] = Verb(
    "stop", "POST", _S + "/stop", SessionRef, None, "stops the turn (abort, then kill after the grace)", _GONE, "stop"
)
RECONNECT: Verb[SessionRef, None] = Verb(
    "reconnect",
    "POST",
    _S + "/reconnect",
    SessionRef,
    None,
    "a new agent connection, resuming its session",
    _GONE,
    "reconnect",
)
RESEND: Verb[SessionRef, bool] = Verb(
    "resend", "POST", _S + "/resend", SessionRef, bool, "resends a prompt lost to a restart", _GONE
)
SEND_QUEUED: Verb[SessionRef, bool] = Verb(
    "send_queued", "POST", _S + "/send-queued", SessionRef, bool, "releases a held queue", _GONE
)
UNQUEUE: Verb[Unqueue, str | None] = Verb(
    "unqueue",
    "POST",
    _S + "/unqueue",
    Unqueue,
    str | None,
    "takes a queued prompt back, whole (null: it is not queued any more)",
    _GONE,
)
CLEAR_QUEUE: Verb[SessionRef, int] = Verb(
    "clear_queue",
    "POST",
    _S + "/clear-queue",
    SessionRef,
    int,
    "drops every queued prompt (the running turn goes on); how many were dropped",
    (UnknownSession,),
    "clear-queue",
)
ANSWER_PERMISSION: Verb[AnswerPermission, None] = Verb(
    "answer_permission",
    "POST",
    _S + "/permission",
    AnswerPermission,
    None,
    "answers a pending permission",
    _GONE,
    "answer",
)
RENAME: Verb[Rename, None] = Verb("rename", "POST", _S + "/rename", Rename, None, "renames it", (UnknownSession,))
CLOSE: Verb[SessionRef, bool] = Verb(
    "close_session",
    "POST",
    _S + "/close",
    SessionRef,
    bool,
    "stops and closes it (kept for a reopen: the last 20)",
    _GONE,
    "close",
)
REOPEN: Verb[Reopen, None] = Verb("reopen", "POST", _S + "/reopen", Reopen, None, "brings a closed session back", _GONE)
REFRESH_CHANGES: Verb[SessionRef, None] = Verb(
    "refresh_changes",
    "POST",
    _S + "/refresh-changes",
    SessionRef,
    None,
    "counts its changes in its folder again",
    (UnknownSession,),
)
MODELS: Verb[SessionRef, ModelChoices] = Verb(
    "models",
    "POST",  # listing may start the agent: not a read
    _S + "/models",
    SessionRef,
    ModelChoices,
    "the models its agent offers and the current one (free_form: any id is taken)",
    _GONE,
    "model",
)
DIFF: Verb[DiffRange, DiffPage] = Verb(
    "diff",
    "GET",
    _S + "/diff",
    DiffRange,
    DiffPage,
    f"a page (at most {DIFF_PAGE:,} characters) of its changes against its base as git prints them, "
    "new files too; later pages name the reading (410: it is gone, read again)",
    (UnknownSession, EngineError, ReadingGone),
    "diff",
    wrap=None,
)
DIFF_STAT: Verb[SessionRef, DiffStat] = Verb(
    "diff_stat",
    "GET",
    _S + "/diff/stat",
    SessionRef,
    DiffStat,
    f"its changes a line per file (at most {MAX_STAT_FILES:,}) and the totals",
    _GONE,
    "diff",
    wrap=None,
)
SET_MODEL: Verb[SetModel, None] = Verb(
    "set_model",
    "POST",
    _S + "/model",
    SetModel,
    None,
    "switches its model from the next turn (refused while a turn runs, or for a model not offered)",
    _GONE,
    "model",
)

_OWN = "(only a worktree made for the session)"
FINISH_STATE: Verb[SessionRef, FinishState] = Verb(
    "finish_state",
    "GET",
    _S + "/worktree",
    SessionRef,
    FinishState,
    f"its worktree's uncommitted, untracked and ignored files and commits not merged or pushed {_OWN}",
    _GONE,
    wrap=None,
)
COMMIT_MESSAGE: Verb[SessionRef, str] = Verb(
    "commit_message",
    "GET",
    _S + "/commit-message",
    SessionRef,
    str,
    "a commit message drafted from its first request and the files it would commit",
    _GONE,
    "finish",
    wrap="message",
)
COMMIT: Verb[Commit, str] = Verb(
    "commit",
    "POST",
    _S + "/commit",
    Commit,
    str,
    f"commits every change of its worktree, new files too (the repository's hooks run); the commit's id {_OWN}",
    _GONE,
    "finish",
    wrap="commit",
)
MERGE: Verb[Merge, MergeResult] = Verb(
    "merge",
    "POST",
    _S + "/merge",
    Merge,
    MergeResult,
    "merges its branch into its base in the repository's checkout; a conflict is undone and named",
    _GONE,
    "finish",
    wrap=None,
)
PUSH: Verb[Push, str] = Verb(
    "push", "POST", _S + "/push", Push, str, "pushes its branch, setting its upstream", _GONE, "finish"
)
PULL_REQUEST: Verb[PullRequest, str] = Verb(
    "pull_request",
    "POST",
    _S + "/pull-request",
    PullRequest,
    str,
    "opens a pull request of its branch with the GitHub CLI; its address",
    _GONE,
    "finish",
    wrap="url",
)
DISCARD: Verb[Discard, str] = Verb(
    "discard",
    "POST",
    _S + "/discard",
    Discard,
    str,
    "removes its worktree and branch; without force refused, naming the work at risk",
    _GONE,
    "finish",
)

# ---- teams (issue 24): an orchestrator, its workers, one budget (engine/teams.py) -----------
MAX_WAIT_SECONDS = 3600.0
"""The longest one wait for workers may last (a relay asks again after it)."""


@dataclass(frozen=True)
class Orchestrate:
    """A session made an orchestrator of workers."""

    session_id: str
    bounds: TeamBounds = TeamBounds()
    """The budget of the whole tree (asked again of an orchestrator: its new bounds, the stop lifted)."""


@dataclass(frozen=True)
class TeamCall:
    """A tool call of an orchestrator's relay, with nothing more to say."""

    capability: str
    """The secret the engine gave the session's relay: it names the orchestration and the session."""


@dataclass(frozen=True)
class StartWorker:
    """An orchestrator's new worker."""

    capability: str
    agent: str
    prompt: str
    name: str = ""
    """"": the agent's name and a number."""
    worktree: bool = False
    """In a new worktree of the orchestrator's repository (else in its folder)."""


@dataclass(frozen=True)
class WorkerPrompt:
    """An orchestrator's prompt to one of its workers."""

    capability: str
    worker: str
    """The worker's session id."""
    prompt: str


@dataclass(frozen=True)
class WaitWorkers:
    """An orchestrator waits for its workers."""

    capability: str
    workers: tuple[str, ...] = ()
    """The workers' session ids (none: every worker of the caller)."""
    until: WaitUntil = "done"
    """done: every one ended; blocked: every one ended or one waits for a permission; any: one
    ended or waits for a permission."""
    timeout_seconds: float = 600.0
    """Then the states as they are (at most :data:`MAX_WAIT_SECONDS`)."""


@dataclass(frozen=True)
class WorkerRef:
    """One worker of an orchestrator."""

    capability: str
    worker: str


@dataclass(frozen=True)
class WorkerState:
    """One worker, as its orchestrator sees it."""

    worker: str
    """Its session id."""
    name: str
    agent: str
    state: LinkState
    outcome: str = ""
    """How its last turn ended (the engine's own turn end: "completed", "aborted", "stuck", "failed")."""
    reason: str = ""
    turns: int = 0
    started_at: float | None = None
    """When its first turn was sent (the engine's clock seconds); None while queued."""
    ended_at: float | None = None
    """When its last turn ended; None while it works."""
    seconds: float | None = None
    """Seconds it has worked, from its first send to its last turn's end or to now (None while
    queued): what an orchestrator reads, where the clock times mean nothing to it."""
    waiting_on: str = ""
    """While blocked: the permission it waits for the user to answer (its title)."""


@dataclass(frozen=True)
class WorkerReply:
    """A worker's last reply, whole, and how its turn ended."""

    worker: str
    text: str
    outcome: str = ""
    reason: str = ""


@dataclass(frozen=True)
class TeamState:
    """A team: its orchestrator, its bounds, what it spent and its workers."""

    orchestrator: str
    bounds: TeamBounds
    workers: tuple[WorkerState, ...]
    running: int
    """Workers with a turn in flight (holding a slot of ``bounds.workers_at_once``)."""
    queued: int
    """Starts and sends waiting for a slot."""
    turns: int
    """Turns ended across the tree."""
    seconds: float
    """Seconds it has run (while the engine ran)."""
    tokens: int
    cost: float
    pending_waits: int
    """Waits for workers not answered yet (answered by a prompt to the waiter after a restart)."""
    stopped: str = ""
    """Why it was stopped ("" while it runs)."""
    note: str = ""
    """The last bound reached or the stall, in words."""


_T = "/team"
_TOOL = (UnknownCapability, EngineError)
ORCHESTRATE: Verb[Orchestrate, TeamState] = Verb(
    "orchestrate",
    "POST",
    _S + "/orchestrate",
    Orchestrate,
    TeamState,
    "makes it an orchestrator with these bounds (its relay's tools reach its agent at its next connect)",
    _GONE,
    "team",
    wrap=None,
)
TEAM_STATE: Verb[SessionRef, TeamState] = Verb(
    "team_state",
    "GET",
    _S + "/team",
    SessionRef,
    TeamState,
    "the team it leads or works in: bounds, what is spent, workers",
    _GONE,
    "team",
    wrap=None,
)
STOP_WORKERS: Verb[SessionRef, int] = Verb(
    "stop_workers",
    "POST",
    _S + "/team/stop",
    SessionRef,
    int,
    "stops every worker of the team it leads (queued ones are dropped); how many",
    _GONE,
    "team",
)
TEAM_WORKERS: Verb[TeamCall, tuple[WorkerState, ...]] = Verb(
    "team_workers", "POST", _T + "/workers", TeamCall, tuple[WorkerState, ...], "the caller's workers", _TOOL
)
TEAM_START: Verb[StartWorker, WorkerState] = Verb(
    "team_start",
    "POST",
    _T + "/start",
    StartWorker,
    WorkerState,
    "starts a worker in the orchestrator's folder or a worktree of it (queued at the bound of workers at "
    "once); refused naming the bound reached",
    _TOOL,
    wrap=None,
)
TEAM_SEND: Verb[WorkerPrompt, WorkerState] = Verb(
    "team_send", "POST", _T + "/send", WorkerPrompt, WorkerState, "sends a worker a prompt", _TOOL, wrap=None
)
TEAM_WAIT: Verb[WaitWorkers, tuple[WorkerState, ...]] = Verb(
    "team_wait",
    "POST",
    _T + "/wait",
    WaitWorkers,
    tuple[WorkerState, ...],
    "waits until the workers are done (their turns ended), one is blocked on a permission, or any; "
    "their states at the timeout",
    _TOOL,
)
TEAM_READ: Verb[WorkerRef, WorkerReply] = Verb(
    "team_read", "POST", _T + "/read", WorkerRef, WorkerReply, "a worker's last reply, whole", _TOOL, wrap=None
)
TEAM_STOP: Verb[WorkerRef, WorkerState] = Verb(
    "team_stop", "POST", _T + "/stop", WorkerRef, WorkerState, "stops a worker's turn", _TOOL, wrap=None
)

TEAM_HELLO: Verb[TeamCall, None] = Verb(
    "team_hello",
    "POST",
    _T + "/hello",
    TeamCall,
    None,
    "the relay's agent listed its tools: the team tools arrived (else the session says they did not)",
    (UnknownCapability,),
)


# ---- many sessions at once: broadcast, fan-out, compare, pick (domain/fan_out.py) ------------
@dataclass(frozen=True)
class Broadcast:
    """One prompt to several sessions."""

    session_ids: tuple[str, ...] = ()
    """Each gets the prompt (named twice: once); at most ``fan_out.MAX_BROADCAST``."""
    prompt: str = ""


@dataclass(frozen=True)
class FanOut:
    """One task to several agents, each in a new worktree."""

    task: str
    agents: tuple[str, ...] = ()
    """One entry per attempt: ``("copilot", "copilot", "opencode")``."""
    folder: str = ""
    """The repository's folder on the engine's machine (absolute, or under ``~``)."""
    base: str = ""
    """Where every attempt's branch starts ("": the branch checked out there)."""
    check: str = ""
    """A command run (by the user's shell) in each attempt's worktree when its turn ends ("": none)."""
    check_timeout: float = CHECK_TIMEOUT
    """Seconds the check may run before it is killed."""
    sandbox: Sandbox | None = None
    """The sandbox of every attempt (None: each attempt's agent's own)."""


@dataclass(frozen=True)
class GroupRef:
    """A fan-out's group."""

    group: str


@dataclass(frozen=True)
class Pick:
    """A fan-out's attempt chosen."""

    group: str
    session_id: str
    """The attempt merged into the base (its uncommitted work committed first)."""
    discard_others: bool = False
    """Remove the other attempts' worktrees and branches (work at risk keeps one, named)."""
    force: bool = False
    """Discard the others even with work at risk (the user saw it named and confirmed)."""
    message: str = ""
    """The commit message of the picked attempt's uncommitted work ("": drafted from its task)."""


@dataclass(frozen=True)
class PickResult:
    """What picking an attempt did."""

    group: str
    session_id: str
    merge: MergeResult
    committed: str = ""
    """The commit made of its uncommitted work before the merge ("" when there was none)."""
    discarded: tuple[Discarded, ...] = ()
    """Each other attempt, when asked to discard them."""


_G = "/fan-out/{group}"
BROADCAST: Verb[Broadcast, tuple[BroadcastResult, ...]] = Verb(
    "broadcast",
    "POST",
    "/broadcast",
    Broadcast,
    tuple[BroadcastResult, ...],
    "sends one prompt to each session (queued where a turn runs); one that cannot take it is refused "
    "with the reason, the others still get it",
    command="send",
    wrap="results",
)
FAN_OUT: Verb[FanOut, str] = Verb(
    "fan_out",
    "POST",
    "/fan-out",
    FanOut,
    str,
    "one task to a new session per attempt, each in a new worktree from the same base; the group's id",
    (EngineError,),
    "run",
    wrap="group",
    status=201,
)
COMPARE: Verb[GroupRef, Comparison] = Verb(
    "compare",
    "GET",
    _G,
    GroupRef,
    Comparison,
    "each attempt's status, time, usage, diff stats and check result",
    (UnknownGroup,),
    "compare",
    wrap=None,
)
RUN_CHECK: Verb[GroupRef, Comparison] = Verb(
    "run_check",
    "POST",
    _G + "/check",
    GroupRef,
    Comparison,
    "runs the check command in each attempt's worktree now (those not running it); the comparison after",
    (UnknownGroup, EngineError),
    "compare",
    wrap=None,
)
PICK: Verb[Pick, PickResult] = Verb(
    "pick",
    "POST",
    _G + "/pick",
    Pick,
    PickResult,
    "merges one attempt into the base (its work committed first); asked, discards the others, "
    "each refused naming its work at risk unless forced",
    (UnknownGroup, EngineError),
    "pick",
    wrap=None,
)

VERBS: tuple[Verb[Any, Any], ...] = (
    ENGINE_INFO,
    ENGINE_STOP,
    FOCUS_CLIENT,
    AGENTS,
    SESSIONS,
    NEW_SESSION,
    CHECK_NEW_SESSION,
    INSPECT_FOLDER,
    LIST_FOLDERS,
    SESSION_VIEW,
    HISTORY_PAGE_OF,
    DETAILS,
    SEND,
    STOP,
    RECONNECT,
    RESEND,
    SEND_QUEUED,
    UNQUEUE,
    CLEAR_QUEUE,
    ANSWER_PERMISSION,
    RENAME,
    CLOSE,
    REOPEN,
    REFRESH_CHANGES,
    MODELS,
    SET_MODEL,
    DIFF,
    DIFF_STAT,
    FINISH_STATE,
    COMMIT_MESSAGE,
    COMMIT,
    MERGE,
    PUSH,
    PULL_REQUEST,
    DISCARD,
    ORCHESTRATE,
    TEAM_STATE,
    STOP_WORKERS,
    TEAM_WORKERS,
    TEAM_START,
    TEAM_SEND,
    TEAM_WAIT,
    TEAM_READ,
    TEAM_STOP,
    TEAM_HELLO,
    BROADCAST,
    FAN_OUT,
    COMPARE,
    RUN_CHECK,
    PICK,
)
