"""sessions.json loses at most what is damaged: it is written a session per line, and a file
that cannot be read whole — damaged, cut off, or larger than an engine writes (an older
version wrote 70 MB for one session's queue) — is read a session at a time. The sessions that
cannot be read are named; the others come back; the file is moved aside, whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polypilot_tui.domain.limits import RECORD_BYTES, REGISTRY_BYTES
from polypilot_tui.domain.safe_json import dump_json
from polypilot_tui.storage.registry import REGISTRY_FILE, Registry, SessionRecord


def record(sid: str, **fields: object) -> SessionRecord:
    return SessionRecord(id=sid, name=f"name {sid}", agent="demo", **fields)  # type: ignore[arg-type]


def older_file(path: Path, records: list[dict[str, object]]) -> None:
    """sessions.json as an older version wrote it: indented JSON, a record over many lines."""
    path.write_text(dump_json({"version": 1, "saved_at": 5.0, "sessions": records}, indent=1))


def test_a_saved_registry_has_a_session_per_line_and_reads_back_equal(tmp_path: Path) -> None:
    records = [record("a", queue=("one\ntwo", "x" * 1000)), record("b", interrupted_prompt="p"), record("c")]
    registry = Registry(tmp_path)
    registry.save(records, 7.0)
    lines = registry.path.read_text().splitlines()
    assert len(lines) == 2 + len(records) and all(line.startswith('{"id": "') for line in lines[1:-1])
    assert json.loads(registry.path.read_text())["saved_at"] == 7.0  # still one JSON document
    again = Registry(tmp_path).load()
    assert again.sessions == tuple(records) and again.saved_at == 7.0 and again.problem == ""


def test_the_older_file_of_issue_22_comes_back_whole(tmp_path: Path) -> None:
    """70 queued prompts of 1 MB in one session made a 70 MB file that the reader refused:
    the whole list was moved aside as corrupt, the sessions with no queue too. It is within
    what an engine may write now (limits.REGISTRY_BYTES): everything comes back."""
    queue = tuple(f"{i} " + "x" * 1_000_000 for i in range(70))
    older_file(tmp_path / REGISTRY_FILE, [record("a").to_json(), record("big", queue=queue).to_json()])
    snapshot = Registry(tmp_path).load()
    assert snapshot.problem == "" and [r.id for r in snapshot.sessions] == ["a", "big"]
    assert snapshot.sessions[1].queue == queue


@pytest.mark.expect_errors(r"session\(s\) of .*sessions.json could not be read back", "sessions.json was unusable")
def test_one_session_too_large_in_a_file_too_large_is_lost_alone(tmp_path: Path) -> None:
    huge = record("big", queue=tuple(f"{i} " + "x" * 1_000_000 for i in range(100))).to_json()
    older_file(tmp_path / REGISTRY_FILE, [record("a").to_json(), huge, record("c").to_json()])
    original = (tmp_path / REGISTRY_FILE).read_bytes()
    assert len(original) > REGISTRY_BYTES and len(original) > RECORD_BYTES
    snapshot = Registry(tmp_path).load()
    assert [r.id for r in snapshot.sessions] == ["a", "c"]
    assert snapshot.lost == (f"session big (“name big”): larger than {RECORD_BYTES:,} bytes",)
    assert snapshot.moved_to is not None and snapshot.moved_to.read_bytes() == original  # nothing thrown away
    assert not (tmp_path / REGISTRY_FILE).exists()  # the next save writes the two
    assert "1 session(s)" in snapshot.problem and "session big" in snapshot.problem


@pytest.mark.expect_errors(r"session\(s\) of .*sessions.json could not be read back")
def test_a_damaged_line_loses_that_session_alone(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    registry.save([record("a"), record("b", queue=("kept?",)), record("c")], 3.0)
    lines = registry.path.read_bytes().split(b"\n")
    lines[2] = lines[2][:40] + b"\x00\xff garbage" + lines[2][60:]
    registry.path.write_bytes(b"\n".join(lines))
    snapshot = Registry(tmp_path).load(repair=False)
    assert [r.id for r in snapshot.sessions] == ["a", "c"] and snapshot.saved_at == 3.0
    assert len(snapshot.lost) == 1 and snapshot.lost[0].startswith("session b (“name b”): damaged")
    assert snapshot.moved_to is None and registry.path.exists()  # not repaired: left as it is


@pytest.mark.expect_errors(r"session\(s\) of .*sessions.json could not be read back", "sessions.json was unusable")
def test_a_file_cut_off_keeps_the_sessions_before_the_cut(tmp_path: Path) -> None:
    older_file(tmp_path / REGISTRY_FILE, [record("a").to_json(), record("b", turns=3).to_json()])
    text = (tmp_path / REGISTRY_FILE).read_text()
    (tmp_path / REGISTRY_FILE).write_text(text[: text.index('"turns": 3')])
    snapshot = Registry(tmp_path).load()
    assert [r.id for r in snapshot.sessions] == ["a"]
    assert snapshot.lost == ("session b (“name b”): cut off at the end of the file",)


@pytest.mark.expect_errors(r"session\(s\) of .*sessions.json could not be read back", "sessions.json was unusable")
def test_entries_that_are_not_sessions_are_named_and_the_others_kept(tmp_path: Path) -> None:
    entries = [record("a").to_json(), {"id": "x"}, record("a").to_json(), 5, record("d", cwd="/" * 5000).to_json()]
    (tmp_path / REGISTRY_FILE).write_text(json.dumps({"sessions": entries}))
    snapshot = Registry(tmp_path).load()
    assert [r.id for r in snapshot.sessions] == ["a"]
    assert snapshot.lost == (
        "session x: not a session record",
        "session a (“name a”): its id is taken by an earlier session in the file",
        "a session: not a session record",
        "session d (“name d”): not a session record",  # a folder no engine writes is not cut into another
    )
    assert snapshot.moved_to is not None


@pytest.mark.expect_errors(r"session\(s\) of .*sessions.json could not be read back", "sessions.json was unusable")
def test_a_file_larger_than_an_engine_writes_keeps_what_an_engine_holds(tmp_path: Path) -> None:
    each = RECORD_BYTES // 2
    count = REGISTRY_BYTES // each + 2
    with open(tmp_path / REGISTRY_FILE, "w") as file:  # as Registry.save writes it, without its seconds of redaction
        file.write('{"version": 1, "saved_at": 1.0, "sessions": [\n')
        file.write(",\n".join(dump_json(record(f"s{i}", queue=("q" * each,)).to_json()) for i in range(count)))
        file.write("\n]}\n")
    snapshot = Registry(tmp_path).load()
    kept = len(snapshot.sessions)
    assert 0 < kept < count and [r.id for r in snapshot.sessions] == [f"s{i}" for i in range(kept)]
    assert len(snapshot.lost) == count - kept and "bytes an engine holds" in snapshot.lost[0]
