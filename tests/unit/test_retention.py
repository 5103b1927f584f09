"""The clean-up rule of the state folder (storage/retention.py), on real files and times."""

from __future__ import annotations

import os
import time
from pathlib import Path

from polypilot_tui.storage.registry import Registry, SessionRecord
from polypilot_tui.storage.retention import RECORDINGS_MAX_BYTES, RETENTION_DAYS, prune_state_dir

NOW = time.time()
OLD = NOW - (RETENTION_DAYS + 1) * 86400
RECENT = NOW - 3600


def aged(path: Path, when: float) -> Path:
    os.utime(path, (when, when))
    return path


def file(path: Path, when: float) -> Path:
    path.write_text("x")
    return aged(path, when)


def folder(path: Path, when: float) -> Path:
    path.mkdir(parents=True)
    file(path / "agent-stderr.log", when)
    return aged(path, when)


def test_only_old_orphans_go_and_a_live_session_stays_whatever_its_age(tmp_path: Path) -> None:
    Registry(tmp_path).save([SessionRecord("live", "kept", "demo")], NOW)
    live = folder(tmp_path / "sessions" / "live", OLD)
    old_orphan = folder(tmp_path / "sessions" / "gone-long-ago", OLD)
    new_orphan = folder(tmp_path / "sessions" / "a-run-just-now", RECENT)
    touched = folder(tmp_path / "sessions" / "old-folder-new-file", OLD)
    aged(touched / "agent-stderr.log", RECENT)
    moved_old = file(tmp_path / "history.db.corrupt-20250101T000000-1", OLD)
    moved_new = file(tmp_path / "sessions.json.corrupt-20261101T000000-1", RECENT)

    removed = prune_state_dir(tmp_path, NOW)
    assert set(removed) == {old_orphan, moved_old}
    assert live.exists() and new_orphan.exists() and touched.exists() and moved_new.exists()


def test_recordings_go_by_age_then_oldest_first_down_to_the_size_cap(tmp_path: Path) -> None:
    (tmp_path / "sessions.json").write_text('{"sessions": []}')
    recordings = tmp_path / "recordings"
    recordings.mkdir()
    ancient = file(recordings / "a-ancient.jsonl", OLD)
    sizes = [RECORDINGS_MAX_BYTES // 2] * 3  # 1.5x the cap: the oldest one must go
    kept = []
    for i, size in enumerate(sizes):
        path = recordings / f"r{i}.jsonl"
        with open(path, "wb") as fh:
            fh.truncate(size)  # sparse: the size counts, the disk is not used
        kept.append(aged(path, RECENT + i))
    removed = prune_state_dir(tmp_path, NOW)
    assert set(removed) == {ancient, kept[0]}
    assert sum(p.stat().st_size for p in recordings.iterdir()) <= RECORDINGS_MAX_BYTES


def test_nothing_is_pruned_when_the_registry_cannot_be_read(tmp_path: Path) -> None:
    (tmp_path / "sessions.json").write_text("{ not json")
    orphan = folder(tmp_path / "sessions" / "maybe-live", OLD)
    assert prune_state_dir(tmp_path, NOW) == [] and orphan.exists()
