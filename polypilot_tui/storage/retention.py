"""What the state folder keeps, and for how long (the documented clean-up rule).

At every start of the dashboard and of ``polypilot run``:

- ``sessions/<id>/`` folders of sessions that are not in ``sessions.json`` any more and
  that nothing has touched for :data:`RETENTION_DAYS` days are removed (a run's folder is
  removed at once when its turn completed; a failed run's is kept for diagnosis until then);
- recordings older than :data:`RETENTION_DAYS` days are removed, then the oldest others
  until all of them together take at most :data:`RECORDINGS_MAX_BYTES`;
- files moved aside as unusable (``*.corrupt-*``) are removed after :data:`RETENTION_DAYS` days.

Nothing a live session uses is ever touched: a folder of a session in the registry stays
whatever its age.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from polypilot_tui.storage.registry import Registry

log = logging.getLogger(__name__)

RETENTION_DAYS = 14
RECORDINGS_MAX_BYTES = 200_000_000
_DAY = 86400.0


def _newest_change(folder: Path) -> float:
    """The latest modification time of ``folder`` and of the files directly in it."""
    newest = folder.stat().st_mtime
    for child in folder.iterdir():
        try:
            newest = max(newest, child.stat().st_mtime)
        except OSError:
            continue
    return newest


def prune_state_dir(state_dir: Path, now: float | None = None) -> list[Path]:
    """Apply the rule above; returns what was removed (never raises)."""
    now = time.time() if now is None else now
    cutoff = now - RETENTION_DAYS * _DAY
    removed: list[Path] = []
    state_dir = Path(state_dir)
    try:
        snapshot = Registry(state_dir).load(repair=False)
        if snapshot.problem:
            return removed  # without a readable registry nothing can be known to be orphaned
        live = {record.id for record in snapshot.sessions}
        sessions = state_dir / "sessions"
        for folder in sorted(sessions.iterdir()) if sessions.is_dir() else []:
            if (
                folder.is_dir()
                and not folder.is_symlink()
                and folder.name not in live
                and _newest_change(folder) < cutoff
            ):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        for moved in state_dir.glob("*.corrupt-*"):
            if moved.lstat().st_mtime < cutoff:
                (shutil.rmtree if moved.is_dir() and not moved.is_symlink() else Path.unlink)(moved)
                removed.append(moved)
        removed += _prune_recordings(state_dir / "recordings", cutoff)
    except OSError as exc:
        log.warning("cleaning up %s stopped: %s", state_dir, exc)
    if removed:
        log.info("removed %d old files and folders from %s", len(removed), state_dir)
    return removed


def _prune_recordings(folder: Path, cutoff: float) -> list[Path]:
    if not folder.is_dir():
        return []
    removed = []
    files = []
    for path in folder.glob("*.jsonl"):
        info = path.stat()
        if info.st_mtime < cutoff:
            path.unlink()
            removed.append(path)
        else:
            files.append((info.st_mtime, info.st_size, path))
    total = sum(size for _, size, _ in files)
    for _, size, path in sorted(files):  # oldest first
        if total <= RECORDINGS_MAX_BYTES:
            break
        path.unlink()
        removed.append(path)
        total -= size
    return removed
