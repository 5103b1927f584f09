"""A dashboard's mirror (RemoteEngine) in a process of its own, for tests that suspend it.

Run as ``python mirror_driver.py ENGINE_SOCKET``. It attaches, then answers command lines on
stdin with one JSON line each:

- ``ready``: ``{"ready": true}`` once attached;
- ``rows SID N``: waits (at most 30 s) until the mirror holds the session with N history rows,
  fetched as the dashboard fetches them, and answers ``{"rows": count, "digest": …, "notices":
  [message…]}`` (:func:`rows_digest` of the rows' texts).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from polypilot_tui.service.remote import RemoteEngine  # noqa: E402


def rows_digest(texts: Iterable[str]) -> str:
    """One line standing for many rows' texts, in order."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()


async def main(socket: Path) -> None:
    mirror = RemoteEngine(lambda: asyncio.sleep(0, socket), reconnect=False)
    notices: list[str] = []
    mirror.on_notice(lambda notice: notices.append(notice.message))
    await mirror.start()
    loop = asyncio.get_running_loop()
    while line := await asyncio.to_thread(sys.stdin.readline):
        words = line.split()
        if words == ["ready"]:
            answer: dict[str, object] = {"ready": True}
        elif words[:1] == ["rows"]:
            sid, count = words[1], int(words[2])
            deadline = loop.time() + 30
            while not (sid in mirror.ids() and len(mirror.history(sid)) >= count) and loop.time() < deadline:
                await asyncio.sleep(0.05)  # the history is fetched when asked for, as a redraw asks
            rows = [item.text for item in mirror.history(sid)] if sid in mirror.ids() else []
            answer = {"rows": len(rows), "digest": rows_digest(rows), "notices": notices}
        else:
            answer = {"error": f"unknown command {line!r}"}
        print(json.dumps(answer), flush=True)
    await mirror.detach(stop_engine=False)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
