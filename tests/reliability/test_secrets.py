"""Issue #11.2 and #22: secrets never reach disk, and everything the app writes is private.

Four secrets are planted the four ways the app can know them: a secret-named variable of
its environment, the key an agent names with ``api_key_env`` (a plainly named variable),
an agent ``env`` value named like a secret, and one that only looks like a key. Others are
never known to the app, only given away by their shape (a URL's password, a JWT, a PEM key,
provider tokens, ``--password …`` …). Real app processes (the dashboard's set-up in
tests/support/secrets_driver.py, and ``polypilot run``) then run sessions that echo them,
put them in tool titles, inputs, outputs, permission titles, session titles and names,
stream them split across chunks, fail with them in tracebacks and stderr, crash, and are
SIGKILLed with them in an unfinished reply, all under umask 000. Every file under the state
folder, and ``status --json``, is then searched for every secret and every piece of one.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import fields, is_dataclass, replace
from enum import Enum
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from polypilot_tui.agents.acp.client import Transcript
from polypilot_tui.agents.stderr_log import MAX_LINE_BYTES, AgentStderr
from polypilot_tui.commands.status import print_status
from polypilot_tui.config import Settings
from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.domain.events import AgentEvent, EventType
from polypilot_tui.domain.records import ActionTaken, EngineAction, EventReceived, SessionAdded
from polypilot_tui.engine.recorder import Recorder
from polypilot_tui.infra.logs import setup_file_logging, setup_stderr_logging
from polypilot_tui.infra.redact import REDACTOR
from polypilot_tui.storage.history import HISTORY_FILE, HistoryDB, WriteResult
from polypilot_tui.storage.registry import Registry, SessionRecord
from polypilot_tui.storage.spill import Spill, write_spill
from polypilot_tui.ui.ui_state import UiState, save_ui_state
from tests.reliability.conftest import FAKE_AGENT, ROOT, clean_env, files_under, polypilot, toml_string, unique

TOKEN_STARTS = ("sk-proj-", "sk-ant-api03-", "npm_", "glpat-", "ghp_", "xoxb-", "hf_")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def shaped_secrets() -> list[tuple[str, str]]:
    """(text an agent may say, the secret in it) for secrets only their shape gives away:
    the app never learns these values."""
    payload = _b64url(json.dumps({"sub": unique("user-"), "admin": True}).encode())
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    jwt = f"{header}.{payload}.{_b64url(os.urandom(32))}"
    pem = "\n".join(base64.b64encode(os.urandom(48)).decode() for _ in range(3))
    words = {name: unique("") for name in ("url", "git", "aws", "arg", "conn", "json", "yaml", "docker")}
    azure = base64.b64encode(os.urandom(64)).decode()
    age = base64.b32encode(os.urandom(40)).decode().rstrip("=")[:58]
    return [
        (f"postgres://app:{words['url']}@db.internal:5432/prod", words["url"]),
        (f"https://ci:{words['git']}@git.example.com/team/repo.git", words["git"]),
        (jwt, jwt[jwt.index(".") + 1 :]),
        (f"-----BEGIN RSA PRIVATE KEY-----\n{pem}\n-----END RSA PRIVATE KEY-----", pem),
        *((prefix + token, token) for prefix in TOKEN_STARTS for token in [unique("")]),
        (f"aws_secret_access_key = {words['aws']}", words["aws"]),
        (f"mysql --password {words['arg']} prod", words["arg"]),
        (f"Server=db;User Id=sa;Password={words['conn']};", words["conn"]),
        (f'{{"client_secret": "{words["json"]}"}}', words["json"]),
        (f"password: {words['yaml']}", words["yaml"]),
        (f"DefaultEndpointsProtocol=https;AccountName=a;AccountKey={azure};EndpointSuffix=core.windows.net", azure),
        (f"AGE-SECRET-KEY-1{age}", age),
        (f"docker login -u bot -p {words['docker']} registry.example.com", words["docker"]),
    ]


def pieces(secret: str, size: int = 10) -> set[str]:
    """Every run of ``size`` characters of a secret (of each of its lines): none may be in a file."""
    return {line[i : i + size] for line in secret.splitlines() for i in range(max(1, len(line) - size + 1))}


def agents_file(tmp_path: Path, deploy_token: str, plain_setting: str, shapes: Path) -> Path:
    broken_cli = tmp_path / "bin" / "copilot"
    broken_cli.parent.mkdir()
    broken_cli.write_text('#!/bin/sh\necho "copilot: fatal: the provider refused key $LLM_ACCESS" >&2\nexit 1\n')
    broken_cli.chmod(0o755)
    env = {
        "FAKE_ACP_STATE": str(tmp_path / "agent-state"),
        "FAKE_ACP_LEAK": "LLM_ACCESS,DEPLOY_TOKEN,PLAIN_SETTING",
        "FAKE_ACP_SHAPES": str(shapes),
        "DEPLOY_TOKEN": deploy_token,
        "PLAIN_SETTING": plain_setting,
    }
    provider = '{ base_url = "http://127.0.0.1:9/v1", api_key_env = "LLM_ACCESS" }'
    path = tmp_path / "agents.toml"
    path.write_text(
        f'[leaky]\nkind = "acp"\ncommand = {toml_string(sys.executable)}\nargs = [{toml_string(str(FAKE_AGENT))}]\n'
        "env = { " + ", ".join(f"{k} = {toml_string(v)}" for k, v in env.items()) + " }\n"
        f"provider = {provider}\n\n"
        f'[broken-copilot]\nkind = "copilot"\ncommand = {toml_string(str(broken_cli))}\nmodel = "gpt-4.1"\n'
        f"provider = {provider}\n"
    )
    return path


def umask_zero() -> None:
    os.umask(0)


def test_no_planted_secret_reaches_any_file_or_status_after_echoes_failures_and_crashes(tmp_path: Path) -> None:
    secrets = {
        "env": unique("acme-"),
        "api_key_env": unique("llm-"),
        "agent env name": unique("deploy-"),
        "agent env shape": unique("Zq8"),
    }
    shapes = [
        (text, secret or text[text.rindex("_" if "_" in text else "-") + 1 :]) for text, secret in shaped_secrets()
    ]
    shapes_file = tmp_path / "shapes.json"  # a file: in the agent's env the values would be learned as keys
    shapes_file.write_text(json.dumps(shapes))
    state = tmp_path / "state"
    agents = agents_file(tmp_path, secrets["agent env name"], secrets["agent env shape"], shapes_file)
    env = clean_env(
        state,
        ACME_SERVICE_TOKEN=secrets["env"],
        LLM_ACCESS=secrets["api_key_env"],
        POLYPILOT_AGENTS_FILE=str(agents),
        XDG_RUNTIME_DIR=str(tmp_path / "runtime"),
        SHAPES_FILE=str(shapes_file),
        SECRET_VARS="PLANTED_1,PLANTED_2,PLANTED_3,PLANTED_4",
        **{f"PLANTED_{i}": v for i, v in enumerate(secrets.values(), start=1)},
    )
    driver = [sys.executable, "-m", "tests.support.secrets_driver", str(state), str(agents)]

    app = subprocess.Popen(
        [*driver, "echo"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=umask_zero,
    )
    try:
        line = app.stdout.readline() if app.stdout else ""
        assert line.strip() == "CRASH-ME", (line, app.stderr.read() if app.stderr else "")
        app.send_signal(signal.SIGKILL)  # the crash: the secrets were in a reply still streaming
    finally:
        if app.poll() is None:
            app.kill()
        app.wait(30)
    restored = subprocess.run(
        [*driver, "restore"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, preexec_fn=umask_zero
    )
    assert "RESTORED" in restored.stdout, restored.stderr[-3000:]
    run = subprocess.run(
        [sys.executable, "-m", "polypilot_tui", "run", "--agent", "leaky", "LEAK " + " ".join(secrets.values())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=umask_zero,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 1 and "auth failed" in run.stderr, run.stderr[-3000:]
    status = polypilot(env, "status", "--json")
    assert status.returncode == 0, status.stderr

    files = files_under(state)
    names = {p.relative_to(state).as_posix() for p in files}
    # The sessions really went through every path that could leak.
    assert {"polypilot.log", "run.log", "sessions.json", "history.db"} <= names, names
    assert any(n.endswith("agent-stderr.log") for n in names) and any(n.endswith("acp-transcript.jsonl") for n in names)
    assert any(n.startswith("recordings/") for n in names)
    log = (state / "polypilot.log").read_text()
    assert "Traceback" in log and "[redacted]" in log  # the failing CLI's traceback was logged, redacted
    registry = (state / "sessions.json").read_text()
    assert "[redacted]" in registry and "deploy via postgres://app:[redacted]@db" in registry  # reasons, title
    history = (state / "history.db").read_bytes()
    assert b"show env" in history and b"psql" in history  # the tool's title, the refused permission's
    assert any(b"end of a long line" in p.read_bytes() for p in files if p.name == "agent-stderr.log")
    wanted = {how: pieces(secret) for how, secret in secrets.items()}
    wanted.update({text.split()[0][:24]: pieces(secret) for text, secret in shapes})
    for path in files:
        data = path.read_bytes()
        for how, parts in wanted.items():
            leaked = sorted(p for p in parts if p.encode() in data)
            assert not leaked, f"pieces of the {how} secret are in {path.relative_to(state)}: {leaked[:3]}"
    for how, parts in wanted.items():
        shown = [p for p in parts if p in status.stdout or p in status.stderr]
        assert not shown, f"status shows pieces of the {how} secret: {shown[:3]}"

    loose = {
        p.relative_to(state).as_posix(): oct(stat.S_IMODE(p.stat().st_mode))
        for p in [state, *state.rglob("*")]
        if stat.S_IMODE(p.stat().st_mode) != (0o700 if p.is_dir() else 0o600)
    }
    assert not loose, f"not private under umask 000: {loose}"


def test_run_creates_the_state_folder_and_its_parents_private(tmp_path: Path) -> None:
    state = tmp_path / "fresh" / "deeper" / "state"  # nothing of it exists yet
    done = subprocess.run(
        [sys.executable, "-m", "polypilot_tui", "run", "--agent", "demo", "FAIL?"],
        cwd=ROOT,
        env=clean_env(state),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=umask_zero,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    for folder in (tmp_path / "fresh", tmp_path / "fresh" / "deeper", state):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder  # it was 0755 (0777 under umask 000)
    assert stat.S_IMODE((state / "run.log").stat().st_mode) == 0o600


# ---- every writer, every field ---------------------------------------------------------------
KNOWN_SECRET = unique("known-") + '"q\\'  # JSON escapes these: found in the record, not in its JSON text
URL_PASSWORD = unique("")
TOKEN_BODY = unique("")
PLANTED = f"said {KNOWN_SECRET} and postgres://app:{URL_PASSWORD}@db/x and ghp_{TOKEN_BODY}"
"""What an agent may say: a secret the app knows, a URL's password and a token."""


def planted(kind: Any) -> Any:
    """A value of type ``kind`` with :data:`PLANTED` in every string, found through the type
    hints: a field added to a record later is planted too."""
    origin, args = get_origin(kind), get_args(kind)
    if kind is str:
        return PLANTED
    if origin in (Union, UnionType):
        return planted(next(a for a in args if a is not type(None)))
    if origin is tuple:
        return (planted(args[0]),) if args[-1] is Ellipsis else tuple(planted(a) for a in args)
    if origin is list:
        return [planted(args[0])]
    if origin in (dict, Mapping):
        return {PLANTED: planted(args[1])}
    if isinstance(kind, type) and issubclass(kind, Enum):
        return next(iter(kind))
    if isinstance(kind, type) and is_dataclass(kind):
        hints = get_type_hints(kind)
        values = {f.name: planted(hints[f.name]) for f in fields(kind) if f.init}
        return kind(**{**values, **({"session_id": "s1"} if "session_id" in values else {})})  # ours, a file name
    if kind is Any:
        return {"deltaContent": PLANTED, "nested": [{"title": PLANTED}], "apiKey": "short"}
    return {bool: False, int: 1, float: 1.0}.get(kind)


def test_every_text_field_of_every_record_is_redacted_by_every_writer(tmp_path: Path) -> None:
    """Each writer is handed records with a secret in every text field (however nested, every
    kind of chat row, every change the recorder takes, every event type), and no file keeps one."""
    REDACTOR.learn([KNOWN_SECRET])
    clock = SystemClock()
    rows = [(f"s{kind.value}", 0, replace(planted(ChatItem), kind=kind)) for kind in ItemKind]
    db = HistoryDB(tmp_path / HISTORY_FILE)
    assert db.write(rows, {"s1": (PLANTED, 1.0)}) is WriteResult.OK
    db.close()
    Registry(tmp_path).save([planted(SessionRecord)], 1.0)
    spill = planted(Spill)
    spill.state_dir = str(tmp_path)
    spill.sessions = [planted(SessionRecord).to_json()]
    write_spill(spill)
    assert save_ui_state(tmp_path, planted(UiState)) == ""
    recorder = Recorder(tmp_path / "recordings", clock, 10_000_000)
    recorder.on_record(SessionAdded("s1", restored=True, mid_turn=True, prompt=PLANTED))
    for event_type in EventType:
        recorder.on_record(EventReceived("s1", AgentEvent(event_type.value, planted(Any))))
    for action in EngineAction:
        for by_user in (True, False):
            recorder.on_record(replace(planted(ActionTaken), action=action, by_user=by_user))
    recorder.close()
    transcript = Transcript(tmp_path / "acp-transcript.jsonl", clock)
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": PLANTED}}
    tool = {"sessionUpdate": "tool_call", "title": PLANTED, "rawInput": {"command": PLANTED}}
    for update in (chunk, tool):
        transcript.write("in", {"method": "session/update", "params": {"sessionId": "a", "update": update}})
    transcript.write("out", {"id": 1, "method": "session/prompt", "params": {"prompt": [{"text": PLANTED}]}})
    transcript.close()
    stderr = AgentStderr(tmp_path / "agent-stderr.log")
    # longer than one read of the pipe: written in pieces, the first cut 4 characters into the password
    long_line = "y" * (MAX_LINE_BYTES - PLANTED.index(URL_PASSWORD) - 4) + PLANTED + " " + "z" * 4000
    os.write(stderr.write_fd, f"{PLANTED}\n{long_line}\n".encode())
    stderr.close()
    assert stderr.done.wait(10)
    assert not any(URL_PASSWORD[:10] in line for line in stderr.recent_lines())
    log_file = setup_file_logging(tmp_path, "polypilot.log")
    try:
        try:
            raise RuntimeError(PLANTED)
        except RuntimeError:
            logging.getLogger("test").exception("failed with %s", PLANTED)
    finally:
        setup_stderr_logging(io.StringIO())  # takes the file handler off the root logger
    assert log_file is not None

    files = files_under(tmp_path)
    assert len(files) >= 8, [p.name for p in files]
    for path in files:
        data = path.read_bytes()
        assert b"[redacted]" in data or path.name.endswith(("-wal", "-shm")), path.name
        for secret in (KNOWN_SECRET, URL_PASSWORD, TOKEN_BODY):
            found = [p for p in pieces(secret) if p.encode() in data]
            assert not found, f"{path.relative_to(tmp_path)} holds pieces of a secret: {found[:3]}"


def test_status_shows_no_secret_whatever_field_of_the_registry_holds_one(tmp_path: Path) -> None:
    """``status`` reads ``sessions.json`` as it finds it (an older version's, edited by hand):
    every text of its document goes through the redactor, not only the names it knows."""
    REDACTOR.learn([KNOWN_SECRET])
    doc = {"version": 1, "saved_at": 1.0, "sessions": [planted(SessionRecord).to_json()]}
    (tmp_path / "sessions.json").write_text(json.dumps(doc))  # not through the registry: unredacted
    settings = Settings.read(None, state_dir=tmp_path)
    for json_mode in (True, False):
        out = io.StringIO()
        assert print_status(settings, json_mode=json_mode, out=out) == 0
        assert "[redacted]" in out.getvalue()
        for secret in (KNOWN_SECRET, URL_PASSWORD, TOKEN_BODY):
            assert not [p for p in pieces(secret) if p in out.getvalue()], out.getvalue()


def test_an_exception_that_ends_a_process_is_logged_and_said_redacted(tmp_path: Path) -> None:
    """A detached engine's stderr is ``engine.err`` in the state folder: the exception that
    ends a process (its message may quote an agent) reaches it, and the log, redacted."""
    password = unique("")
    crash = (
        "from pathlib import Path; from polypilot_tui.infra.logs import setup_file_logging;"
        f"setup_file_logging(Path({str(tmp_path)!r}), 'engine.log');"
        f"raise RuntimeError('the agent said postgres://app:{password}@db/x')"
    )
    with (tmp_path / "engine.err").open("w") as err:
        done = subprocess.run([sys.executable, "-c", crash], cwd=ROOT, stderr=err, timeout=60)
    assert done.returncode == 1
    said, log = (tmp_path / "engine.err").read_text(), (tmp_path / "engine.log").read_text()
    assert (
        said.startswith("polypilot: RuntimeError: the agent said postgres://app:[redacted]@db/x")
        and "engine.log" in said
    )
    assert "Traceback" in log and "postgres://app:[redacted]@db/x" in log
    assert password not in said + log
