"""A client and an engine of different versions never do less than was asked without a word:
an engine refuses a request field it does not know, and a client asks an engine of API 1 (one
running since before an upgrade) for no sandbox it would drop."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from polypilot_tui.config import Settings
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.domain.sandbox import NO_SANDBOX, Sandbox, SandboxMode
from polypilot_tui.engine.api import EngineError
from polypilot_tui.engine.verbs import NEW_SESSION, NewSession
from polypilot_tui.service.address import API
from polypilot_tui.service.client import EngineClient
from tests.support import fake_engine
from tests.support.engine import demo_harness
from tests.support.engine_service import ServedEngine, short_state_dir
from tests.support.waiting import until

pytestmark = pytest.mark.timeout(30)


async def test_an_engine_refuses_a_request_field_it_does_not_know_and_makes_nothing(tmp_path: Path) -> None:
    settings = Settings.read(None, state_dir=tmp_path, record=False)
    harness = demo_harness(settings)
    served = ServedEngine(harness.engine)
    socket = await served.open()
    http = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(socket)), base_url="http://engine")
    try:
        body = {"agent": "demo", "sandbox": {"mode": "workspace", "network": None}, "jail": {"mode": "tight"}}
        answer = await http.post(API + "/sessions", content=dump_json(body).encode())
        assert answer.status_code == 400, answer.text
        said = answer.json()["error"]
        assert "'jail'" in said and "older than its client" in said and "polypilot engine stop" in said
        assert harness.engine.ids() == []  # nothing was made with the field dropped
        known = {"agent": "demo", "sandbox": None}
        assert (await http.post(API + "/sessions", content=dump_json(known).encode())).status_code == 201
    finally:
        await http.aclose()
        await served.close()
        await harness.engine.close()


async def test_a_client_asks_an_engine_of_api_1_for_no_sandbox() -> None:
    folder = short_state_dir()
    socket, pidfile = folder / "engine.sock", folder / "engine.pid"
    env = {**os.environ, "FAKE_ENGINE_API": "1"}
    server = subprocess.Popen([sys.executable, fake_engine.__file__, "serve", str(socket), str(pidfile)], env=env)
    client = EngineClient(socket, timeout=10.0)
    try:
        await until(socket.exists, 10, "the old engine's socket")
        sandboxed = NewSession("demo", sandbox=Sandbox(SandboxMode.WORKSPACE))
        with pytest.raises(EngineError, match=r"older than this polypilot \(API 1, not \d+\).*polypilot engine stop"):
            await client.call(NEW_SESSION, sandboxed)
        started = time.monotonic()
        with pytest.raises(EngineError, match="older than this polypilot"):  # the version is asked once
            await client.call(NEW_SESSION, sandboxed)
        assert time.monotonic() - started < 1.0
        # A request without a sandbox goes to it as before (this stand-in answers no POST: 501).
        with pytest.raises(EngineError) as plain:
            await client.call(NEW_SESSION, NewSession("demo", sandbox=NO_SANDBOX))
        assert "older than" not in str(plain.value)
    finally:
        await client.aclose()
        server.kill()
        server.wait()
        for path in (socket, pidfile):
            path.unlink(missing_ok=True)
        folder.rmdir()
