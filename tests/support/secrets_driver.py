"""One app process for the secrets test: the dashboard's own set-up without the screen.

    python -m tests.support.secrets_driver STATE AGENTS_FILE (echo|restore)

It does what ``polypilot`` does before and under the UI (cli.cmd_tui + ui.launch.run_app): the log
file in the state folder, the state-folder lock, the agents file, a SessionManager with
persistence and recordings. ``echo`` then runs sessions that echo, fail and crash with the
planted secrets (the values of the variables named in ``SECRET_VARS``):

- a demo session that echoes a prompt holding them;
- a fake ACP agent that prints them to stderr and in a traceback, says them, and fails the
  turn with them in its error (``LEAK``); another that prints them and dies (``LEAKCRASH``);
- a "Copilot CLI" that prints the key and exits (the SDK logs its stderr and a traceback);
- a demo session named after a URL with a password, sent every secret-bearing text of
  ``SHAPES_FILE`` (secrets only their shape gives away: URL passwords, JWTs, a PEM key …);
- a fake ACP agent that puts them, and the planted secrets, in every field an agent can
  (``LEAKTOOL``: the session title, a tool's title, input and output, a permission's title
  — refused here, so it is saved as a tool row — thoughts, a plan, stderr, split replies);
- a fake ACP agent that says them and hangs mid-reply (``LEAKHANG``): then it prints
  ``CRASH-ME`` and waits to be SIGKILLed, with the secrets in an unfinished draft.

``restore`` starts again on the same folder (the draft comes back as a row), then quits.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from polypilot_tui.agents.base import REJECT_ONCE
from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.engine.persistence import attach_persistence
from polypilot_tui.infra.logs import setup_file_logging
from polypilot_tui.storage.lock import StateLock
from tests.support.waiting import until


async def wait(check: Callable[[], Any], seconds: float = 30.0) -> None:
    try:
        await until(check, seconds)
    except AssertionError as exc:
        raise SystemExit(f"driver: {exc}") from None


async def main(state: Path, agents_file: Path, mode: str) -> None:
    lock = StateLock.acquire(state)
    setup_file_logging(state, "polypilot.log")
    settings = Settings.read(
        None,
        state_dir=state,
        agents_file=agents_file,
        demo_speed=50.0,  # type: ignore[call-arg]
        stop_grace_seconds=1.0,
    )
    manager = SessionManager(settings, load_agents(agents_file), SystemClock())
    persistence = attach_persistence(manager, settings)
    secrets = [os.environ[name] for name in os.environ["SECRET_VARS"].split(",")]
    if mode == "restore":
        await asyncio.sleep(1.0)
        await manager.shutdown()
        await persistence.close()
        lock.release()
        print("RESTORED", flush=True)
        return

    demo = await manager.create_session("demo", f"keys {secrets[0]}")
    await manager.send(demo, "please remember " + " and ".join(secrets))
    await wait(lambda: manager.session(demo).turns)

    for prompt in ("LEAK now", "LEAKCRASH now"):
        sid = await manager.create_session("leaky")
        await manager.send(sid, f"{prompt} " + " ".join(secrets))
        await wait(lambda sid=sid: manager.session(sid).turns)

    shapes = [text for text, _ in json.loads(Path(os.environ["SHAPES_FILE"]).read_text())]
    url = next(text for text in shapes if "://" in text)
    named = await manager.create_session("demo", f"db {url}")
    for done, text in enumerate(shapes, start=1):
        await manager.send(named, text)
        await wait(lambda done=done: len(manager.session(named).turns) >= done)

    tools = await manager.create_session("leaky")
    await manager.send(tools, "LEAKTOOL now")
    await wait(lambda: manager.view(tools).pending_permission is not None)
    asked = manager.view(tools).pending_permission
    assert asked is not None
    await manager.answer_permission(tools, asked.request_id, REJECT_ONCE)
    await wait(lambda: manager.session(tools).turns)

    broken = manager.add_session("broken-copilot")
    await manager.send(broken, "hello")
    await wait(lambda: manager.session(broken).turns)

    hang = await manager.create_session("leaky")
    await manager.send(hang, "LEAKHANG now")
    await wait(lambda: "my keys are" in manager.streaming_text(hang))
    await persistence.flush()
    await asyncio.sleep(0.5)  # the draft is written through
    print("CRASH-ME", flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
