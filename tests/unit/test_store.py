"""Registry and history store (storage/): atomic, private, and never a gate."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from pathlib import Path

import pytest

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.infra.private import atomic_write
from polypilot_tui.storage.history import HISTORY_FILE, HistoryDB, WriteResult
from polypilot_tui.storage.registry import REGISTRY_FILE, Registry, RegistryFenced, SessionRecord
from polypilot_tui.storage.store import Store


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def record(sid: str = "s1", **extra: object) -> SessionRecord:
    return SessionRecord(id=sid, name=f"name-{sid}", agent="demo", **extra)  # type: ignore[arg-type]


def items(n: int) -> list[ChatItem]:
    kinds = [ItemKind.USER, ItemKind.ASSISTANT, ItemKind.TOOL, ItemKind.SYSTEM]
    out = []
    for i in range(n):
        kind = kinds[i % 4]
        extra = (
            {"tool_call_id": f"call-{i}", "tool_name": "bash", "tool_status": "completed", "tool_detail": "ls -1"}
            if kind is ItemKind.TOOL
            else {}
        )
        out.append(
            ChatItem(
                kind,
                f"message {i} " + "x" * (i % 50),
                1_700_000_000.0 + i,
                interrupted=(i % 7 == 0 and kind is ItemKind.ASSISTANT),
                **extra,
            )
        )
    return out


# ---- files ---------------------------------------------------------------------------
def test_store_dir_is_0700_and_files_0600(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = Store(state)
    store.registry.save([record()], 1.0)
    assert store.history.write([("s1", 0, items(1)[0])]) is WriteResult.OK
    assert mode(state) == 0o700
    assert mode(state / REGISTRY_FILE) == 0o600
    for name in (HISTORY_FILE, f"{HISTORY_FILE}-wal", f"{HISTORY_FILE}-shm"):
        if (state / name).exists():
            assert mode(state / name) == 0o600, name
    store.close()


def test_atomic_write_leaves_old_file_when_the_rename_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "f.json"
    atomic_write(target, b"old")

    def broken(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError):
        atomic_write(target, b"new" * 1000)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]  # no temp file left behind


def test_atomic_write_fsyncs_before_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b))[1])
    atomic_write(tmp_path / "f", b"data")
    assert calls[:2] == ["fsync", "replace"]
    assert mode(tmp_path / "f") == 0o600


# ---- registry ------------------------------------------------------------------------
def test_registry_round_trip(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    recs = [
        record("a", turn_in_flight=True, last_prompt="fix it", last_activity_at=5.0, status="thinking"),
        record("b", agent_session_id="agent-42", interrupted_prompt="again"),
    ]
    registry.save(recs, 123.0)
    snap = registry.load()
    assert snap.sessions == tuple(recs)
    assert snap.saved_at == 123.0
    registry.save(recs, 124.0)
    assert registry.load().saved_at == 124.0
    assert registry.writes == 2


def test_missing_registry_is_empty(tmp_path: Path) -> None:
    snap = Registry(tmp_path).load()
    assert snap.sessions == () and snap.problem == ""


@pytest.mark.expect_errors("sessions.json was unusable")
def test_corrupt_registry_is_moved_aside(tmp_path: Path) -> None:
    (tmp_path / REGISTRY_FILE).write_text('{"sessions": [')
    assert "not valid JSON" in Registry(tmp_path).load(repair=False).problem
    assert (tmp_path / REGISTRY_FILE).exists()  # status never changes anything
    snap = Registry(tmp_path).load()
    assert snap.sessions == () and str(tmp_path / REGISTRY_FILE) in snap.problem and "line 1" in snap.problem
    assert snap.moved_to is not None and snap.moved_to.exists()
    assert not (tmp_path / REGISTRY_FILE).exists()
    assert len(list(tmp_path.glob(f"{REGISTRY_FILE}.corrupt-*"))) == 1


@pytest.mark.expect_errors(r"session\(s\) of .*sessions.json could not be read back", "sessions.json was unusable")
def test_registry_skips_bad_entries_and_keeps_good_ones(tmp_path: Path) -> None:
    doc = {
        "sessions": [
            {"id": "ok", "name": "n", "agent": "demo", "future_field": 1, "created_at": "bad"},
            {"id": "", "name": "n", "agent": "demo"},
            "junk",
            {"id": "ok", "name": "dup", "agent": "x"},
        ]
    }
    (tmp_path / REGISTRY_FILE).write_text(json.dumps(doc))
    snap = Registry(tmp_path).load()
    assert [r.id for r in snap.sessions] == ["ok"] and snap.sessions[0].created_at == 0.0


# ---- history -------------------------------------------------------------------------
def test_history_round_trip_of_2000_items(tmp_path: Path) -> None:
    # How fast this is, is measured in bench/ (startup, chat_open), not asserted here.
    db = HistoryDB(tmp_path / HISTORY_FILE)
    rows = items(2000)
    assert db.write([("s1", i, item) for i, item in enumerate(rows)]) is WriteResult.OK
    db.close()
    db = HistoryDB(tmp_path / HISTORY_FILE)
    assert db.load("s1") == rows


def test_rows_are_replaced_by_session_and_index(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / HISTORY_FILE)
    running = ChatItem(ItemKind.TOOL, "", 1.0, "c1", "bash", "running")
    done = ChatItem(ItemKind.TOOL, "ok", 1.0, "c1", "bash", "completed")
    db.write([("a", 0, running), ("b", 0, running)])
    db.write([("a", 0, done)])
    assert db.load("a") == [done] and db.load("b") == [running]
    assert db.next_index("a") == 1 and db.next_index("nobody") == 0


def test_drafts_and_deletions(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / HISTORY_FILE)
    db.write([("a", 0, items(1)[0])], {"a": ("partial", 2.0), "b": ("other", 3.0)})
    assert db.load_drafts(["a", "b", "c"]) == {"a": ("partial", 2.0), "b": ("other", 3.0)}
    db.write([], {"a": None}, deletions=["b"])
    assert db.load_drafts(["a", "b"]) == {}
    assert db.load("a") == items(1)


def test_gaps_are_renumbered_on_load(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / HISTORY_FILE)
    rows = items(3)
    db.write([("a", 0, rows[0]), ("a", 5, rows[1]), ("a", 9, rows[2])])
    assert db.load("a") == rows
    assert db.next_index("a") == 3  # new rows go after, never over an old one


def test_many_sessions_load_as_each_alone_would(tmp_path: Path) -> None:
    """``load_many`` reads in a few queries (500 ids each); what it returns is what ``load``
    returns per session: rows in order, gaps renumbered, a session without rows empty."""
    db = HistoryDB(tmp_path / HISTORY_FILE)
    rows = items(3)
    ids = [f"s{n:04d}" for n in range(1100)]
    db.write([(sid, i, rows[(n + i) % 3]) for n, sid in enumerate(ids) for i in range(n % 4)])
    db.write([("gappy", 0, rows[0]), ("gappy", 7, rows[1])])
    loaded = db.load_many([*ids, "gappy", "nobody", ids[0]])
    assert list(loaded) == [*ids, "gappy", "nobody"]
    assert all(loaded[sid] == [rows[(n + i) % 3] for i in range(n % 4)] for n, sid in enumerate(ids))
    assert loaded["gappy"] == rows[:2] and db.next_index("gappy") == 2 and loaded["nobody"] == []


def lock_exclusively(path: Path, *statements: str) -> sqlite3.Connection:
    """Another connection that holds the database's lock until it closes (after ``statements``)."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA locking_mode=EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")
    for statement in statements:
        other.execute(statement)
    other.execute("COMMIT")  # exclusive mode keeps the lock after the commit
    return other


def held_exclusively(path: Path) -> sqlite3.Connection:
    """A history with one row of session "a", locked by another connection until it closes."""
    first = HistoryDB(path)
    first.write([("a", 0, items(1)[0])])
    first.close()
    return lock_exclusively(path, "INSERT INTO drafts VALUES ('z', 't', 0)")


def test_many_sessions_of_an_unreadable_database_are_missing_not_empty(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    other = held_exclusively(path)
    db = HistoryDB(path)
    assert db.load_many(["a", "b"]) == {}  # unknown, so never shown (or saved) as empty
    other.close()
    assert db.load_many(["a", "b"]) == {"a": items(1), "b": []}


@pytest.mark.expect_errors("history.db was unusable")
def test_corrupt_database_is_moved_aside_and_replaced(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    path.write_bytes(b"this is not a database" * 100)
    db = HistoryDB(path)
    assert db.load("a") == []  # known empty now, not "unknown"
    assert db.resets == 1
    assert len(list(tmp_path.glob(f"{HISTORY_FILE}.corrupt-*"))) == 1
    assert db.write([("a", 0, items(1)[0])]) is WriteResult.OK
    assert db.load("a") == items(1)
    assert mode(path) == 0o600


@pytest.mark.expect_errors("history.db was unusable")
def test_write_to_a_corrupted_open_database_resets(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    db = HistoryDB(path)
    db.write([("a", 0, items(1)[0])])
    db.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"\0garbage" * 1000)
    assert db.write([("a", 1, items(2)[1])]) is WriteResult.RESET
    assert db.write([("a", 0, items(1)[0])]) is WriteResult.OK


def test_locked_database_returns_retry_at_once_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    db = HistoryDB(path)
    db.write([("a", 0, items(1)[0])])
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # a writer elsewhere holds the lock
    start = time.perf_counter()
    assert db.write([("a", 1, items(2)[1])]) is WriteResult.RETRY
    assert time.perf_counter() - start < 2.0  # never waits for the lock (sqlite would wait 5 s)
    assert db.load("a") == items(1)  # WAL: reads still work
    other.execute("ROLLBACK")
    other.close()
    assert db.write([("a", 1, items(2)[1])]) is WriteResult.OK
    assert db.load("a") == items(2)


def test_exclusively_locked_database_reads_none_not_empty(tmp_path: Path) -> None:
    path = tmp_path / HISTORY_FILE
    other = held_exclusively(path)
    db = HistoryDB(path)
    start = time.perf_counter()
    assert db.load("a") is None and db.next_index("a") is None and db.load_drafts(["a"]) is None
    assert time.perf_counter() - start < 2.0  # no 5 s busy wait
    other.close()
    assert db.load("a") == items(1) and db.next_index("a") == 1


@pytest.mark.expect_errors(r"history database failed \(writing\): ProgrammingError")  # rows lost: an error
def test_a_statement_sqlite_refuses_drops_the_batch_is_logged_and_never_costs_the_file(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / HISTORY_FILE)
    bad = ChatItem(ItemKind.USER, object(), 1.0)  # type: ignore[arg-type]
    assert db.write([("a", 0, bad)]) is WriteResult.DROPPED
    assert db.resets == 0 and not list(tmp_path.glob("*.corrupt-*"))  # a bug never costs the file
    assert db.write([("a", 0, items(1)[0])]) is WriteResult.OK


def test_a_bug_in_a_write_is_raised_not_swallowed_and_nothing_of_it_is_written(tmp_path: Path) -> None:
    """Only the database's own failures are the store's to sort (HistoryDB._failed); a bug of
    ours goes up to the writer's boundary, which logs it in full (history_sync)."""
    db = HistoryDB(tmp_path / HISTORY_FILE)
    good = items(1)[0]
    bad = ChatItem(None, "no kind", 1.0)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        db.write([("a", 0, good), ("a", 1, bad)])
    assert db.load("a") == []  # the transaction was rolled back whole
    assert db.write([("a", 0, good)]) is WriteResult.OK and db.load("a") == [good]


# ---- one writer ------------------------------------------------------------------------
def test_an_older_history_writer_is_fenced_once_a_newer_one_claims_the_database(tmp_path: Path) -> None:
    old = HistoryDB(tmp_path / HISTORY_FILE, owner="old-run")
    new = HistoryDB(tmp_path / HISTORY_FILE, owner="new-run")
    first, theirs, ours = items(3)
    assert old.write([("s1", 0, first)]) is WriteResult.OK
    assert new.claim() is WriteResult.OK
    assert old.write([("s1", 0, theirs), ("s1", 1, theirs)]) is WriteResult.FENCED
    assert "another polypilot" in old.last_error
    assert new.write([("s1", 1, ours)]) is WriteResult.OK
    assert new.load("s1") == [first, ours]  # the older writer overwrote nothing and added nothing
    old.close()
    new.close()


def test_a_registry_replaced_by_another_process_is_not_overwritten(tmp_path: Path) -> None:
    mine, theirs = Registry(tmp_path), Registry(tmp_path)
    mine.save([record("a")], 1.0)
    theirs.save([record("a"), record("b")], 2.0)  # another app's save replaces the file
    with pytest.raises(RegistryFenced):
        mine.save([record("a")], 3.0)
    assert [r.id for r in Registry(tmp_path).load().sessions] == ["a", "b"]
    theirs.save([record("b")], 4.0)  # the newer writer goes on
    assert [r.id for r in Registry(tmp_path).load().sessions] == ["b"]
