"""Every engine verb is declared once (engine/verbs.py), and everything else agrees with it:
the engine's method of its name, the service's routes, the one client, the command line and
docs/engine-api.md. A verb missing from any of them, or one of them with a verb the
declaration does not have, fails here.

The client and the service are checked for real: an engine served in this process on its Unix
socket (``serve``), asked every verb through EngineClient, answers as the engine in this
process does (the same reply type, or the same refusal with the same words).
"""

from __future__ import annotations

import asyncio
import inspect
import types
from collections.abc import AsyncIterator
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest

from polypilot_tui.cli import build_parser
from polypilot_tui.config import AgentCatalog, AgentConfig, Settings
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine import verbs
from polypilot_tui.engine.api import EngineError, Verb
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.service.address import API, socket_path
from polypilot_tui.service.client import EngineClient
from polypilot_tui.service.serve import serve
from polypilot_tui.service.server import build_app
from tests.support.engine_service import short_state_dir

DOCS = Path(__file__).parents[2] / "docs" / "engine-api.md"
TABLE_START, TABLE_END = "<!-- verbs:start -->", "<!-- verbs:end -->"


# ---- the docs' table, written from the declaration ----------------------------------------------
def type_words(form: Any) -> str:
    """A reply type as the docs say it."""
    if form is None or form is type(None):
        return "null"
    if form is bool:
        return "true \\| false"
    if form is str:
        return "text"
    if form is int:
        return "a number"
    origin = get_origin(form)
    if origin is Literal:
        return " \\| ".join(f'"{value}"' for value in get_args(form))
    if origin in (Union, types.UnionType):
        return " \\| ".join(type_words(arm) for arm in get_args(form))
    if origin is tuple:
        return f"[{type_words(get_args(form)[0])}…]"
    return f"`{form.__name__}`"


def request_cell(verb: Verb[Any, Any]) -> tuple[str, str]:
    """The request's method and path (and query), and its body."""
    path = verb.path.replace("{session_id}", "{id}")
    rest = [f for f in fields(verb.request) if f.name not in verb.path_fields]
    if verb.method == "GET":
        query = "&".join(f"{f.name}=" + ("{" + f.name + "}" if f.default is MISSING else str(f.default)) for f in rest)
        return f"`GET {API}{path}{'?' + query if query else ''}`", ""
    body = ", ".join(f.name + ("?" if f.default is not MISSING else "") for f in rest)
    return f"`POST {API}{path}`", f"`{{{body}}}`" if body else ""


def requests_table() -> str:
    """docs/engine-api.md's table of requests, from VERBS."""
    lines = ["| request | body | answer | refusals |", "|---|---|---|---|"]
    for verb in verbs.VERBS:
        request, body = request_cell(verb)
        reply = type_words(verb.reply)
        answer = reply if verb.wrap is None else f"{{{verb.wrap}: {reply}}}"
        status = f"{verb.status} " if verb.status != 200 else ""
        refusals = ", ".join(str(code) for code in sorted({error.status for error in verb.errors}))
        lines.append(f"| {request} | {body} | {status}{answer}: {verb.summary} | {refusals} |")
    return "\n".join(lines)


def test_the_docs_table_of_requests_is_the_declaration() -> None:
    text = DOCS.read_text()
    between = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    expected = requests_table()
    assert between == expected, f"docs/engine-api.md's table must read (between its markers):\n{expected}"


# ---- the engine's methods ---------------------------------------------------------------------
def test_the_engine_answers_each_verb_with_the_method_of_its_name_and_types() -> None:
    for verb in verbs.VERBS:
        method = getattr(LocalEngine, verb.name, None)
        assert method is not None and inspect.iscoroutinefunction(method), f"LocalEngine.{verb.name} is missing"
        hints = get_type_hints(method)
        (parameter,) = (name for name in inspect.signature(method).parameters if name != "self")
        assert hints[parameter] is verb.request, f"LocalEngine.{verb.name} takes {hints[parameter]}"
        assert hints["return"] == (type(None) if verb.reply is None else verb.reply), f"LocalEngine.{verb.name}"


def test_each_verb_is_declared_once_with_its_own_route() -> None:
    names = [verb.name for verb in verbs.VERBS]
    routes = [(verb.method, verb.path) for verb in verbs.VERBS]
    assert len(set(names)) == len(names) and len(set(routes)) == len(routes)
    declared = {value for value in vars(verbs).values() if isinstance(value, Verb)}
    assert declared == set(verbs.VERBS), "a verb declared but not in VERBS"
    for verb in verbs.VERBS:
        assert is_dataclass(verb.request) and verb.request.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert set(verb.path_fields) == {part[1:-1] for part in verb.path.split("/") if part.startswith("{")}


def test_the_service_routes_every_verb_and_nothing_else() -> None:
    engine = LocalEngine(SessionManager(Settings.read(None), AgentCatalog({}), SystemClock()))
    app = build_app(engine, lambda: None)
    served = {(method, route.path) for route in app.routes for method in route.methods or () if method != "HEAD"}  # type: ignore[attr-defined]
    expected = {(verb.method, API + verb.path) for verb in verbs.VERBS} | {("GET", f"{API}/stream")}
    assert served == expected


def test_every_verb_with_a_command_has_that_subcommand() -> None:
    parser = build_parser()
    (subparsers,) = (action for action in parser._actions if action.dest == "command")  # noqa: SLF001 - argparse's own
    commands = set(subparsers.choices or ())
    for verb in verbs.VERBS:
        if verb.command is not None:
            assert verb.command in commands, f"{verb.name}: no `polypilot {verb.command}`"


# ---- the client and the service, for real ------------------------------------------------------
def sample(verb: Verb[Any, Any]) -> Any:
    """A request of ``verb`` for a session that does not exist (defaults kept)."""
    values: dict[str, Any] = {}
    hints = get_type_hints(verb.request)
    for f in fields(verb.request):
        if f.default is not MISSING:
            continue
        values[f.name] = 0 if hints[f.name] is int else "nope"
    return verb.request(**values)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[LocalEngine, EngineClient]]:
    """An engine served in this process on its socket, a client of it, and an engine in this
    process beside it (its own state folder) to compare with."""
    catalog = AgentCatalog({"demo": AgentConfig(name="demo", kind="demo")})
    state = short_state_dir()
    settings = Settings.read(None, state_dir=state, record=False)
    ready = asyncio.Event()
    task = asyncio.create_task(serve(settings, catalog, ready))
    await asyncio.wait_for(ready.wait(), 30)
    client = EngineClient(socket_path(state))
    local_settings = Settings.read(None, state_dir=tmp_path, record=False)
    local = LocalEngine(SessionManager(local_settings, catalog, SystemClock()))
    try:
        yield local, client
    finally:
        await local.close()
        await client.call(verbs.ENGINE_STOP, verbs.NoArgs())
        await client.aclose()
        await asyncio.wait_for(task, 30)


async def outcome(engine: LocalEngine | EngineClient, verb: Verb[Any, Any]) -> tuple[str, str]:
    try:
        reply = await engine.call(verb, sample(verb))
    except EngineError as exc:
        return type(exc).__name__, str(exc)
    return "reply", type(reply).__name__


async def test_the_served_engine_answers_every_verb_as_the_engine_in_this_process(
    served: tuple[LocalEngine, EngineClient],
) -> None:
    local, client = served
    for verb in verbs.VERBS:
        if verb is verbs.ENGINE_STOP:
            continue  # the fixture's end asks it
        here, there = await outcome(local, verb), await outcome(client, verb)
        assert here == there, verb.name
        if "session_id" in verb.path_fields and verb not in (verbs.REOPEN, verbs.CLOSE):  # those say no in words
            assert here[0] == "UnknownSession", (verb.name, here)
