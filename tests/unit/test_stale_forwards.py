"""A killed dashboard's ssh forward folders are found and removed; live and fresh ones are kept."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from polypilot_tui.service.ssh import FOLDER_PREFIX, STALE_AGE, clean_stale_forwards


def forward_folder(base: Path, name: str, *, listening: bool, age: float) -> tuple[Path, socket.socket]:
    folder = base / f"{FOLDER_PREFIX}{name}"
    folder.mkdir(mode=0o700)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "engine.sock"))
    if listening:
        server.listen(1)
    else:
        server.close()  # the socket file stays, nobody listens: its ssh was killed
    then = time.time() - age
    os.utime(folder, (then, then))
    return folder, server


def test_only_old_folders_nobody_serves_are_removed(tmp_path: Path) -> None:
    dead, _ = forward_folder(tmp_path, "dead", listening=False, age=STALE_AGE + 5)
    live, server = forward_folder(tmp_path, "live", listening=True, age=STALE_AGE + 5)
    fresh, _ = forward_folder(tmp_path, "fresh", listening=False, age=0)
    other = tmp_path / "not-ours"
    other.mkdir()
    try:
        assert clean_stale_forwards([str(tmp_path)]) == [str(dead)]
        assert not dead.exists() and live.exists() and fresh.exists() and other.exists()
    finally:
        server.close()
