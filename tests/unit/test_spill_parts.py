"""A quit with more unsaved than one spill file may hold writes several, each within what
the next start reads (limits.SPILL_BYTES), and the next start writes every row back, in
order. One file used to take everything: past its bound, the next start refused it."""

from __future__ import annotations

from pathlib import Path

import pytest

from polypilot_tui.domain.chat import ChatItem, ItemKind
from polypilot_tui.storage import spill as spill_module
from polypilot_tui.storage.spill import Spill, find_spills, read_spill, write_spill
from polypilot_tui.storage.store import Store

BOUND = 60_000
"""A small bound for the test (the real one is ~110 MB: a row of a megabyte fits many times)."""


def unsaved(state: Path) -> Spill:
    spill = Spill(str(state), 10.0, sessions=[{"id": "s1", "name": "one", "agent": "demo"}])
    spill.rows = [("s1", i, ChatItem(ItemKind.ASSISTANT, f"row {i} " + "w" * 2000, float(i))) for i in range(80)]
    spill.appended = {"s2": [ChatItem(ItemKind.USER, f"late {i} " + "v" * 3000, 1.0) for i in range(30)]}
    spill.drafts = {"s1": ("a reply cut short " + "d" * 5000, 2.0)}
    return spill


def test_a_large_spill_is_written_in_parts_and_read_back_whole_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spill_module, "MAX_SPILL_BYTES", BOUND)
    state = tmp_path / "state"
    state.mkdir()
    written = write_spill(unsaved(state))
    assert len(written) > 3 and written == find_spills(state)  # in the order they are read back
    assert all(path.stat().st_size <= BOUND for path in written)
    parts = [read_spill(path) for path in written]
    assert parts[0].sessions is not None and all(p.sessions is None for p in parts[1:])
    assert [idx for p in parts for _, idx, _ in p.rows] == list(range(80))
    assert [i.text.split()[1] for p in parts for i in p.appended.get("s2", [])] == [str(i) for i in range(30)]
    store = Store(state)
    try:
        messages = store.recover_spills()
        assert len(messages) == len(written) and find_spills(state) == []
        rows = store.history.load_many(["s1", "s2"])
        assert [i.text for i in rows["s1"]] == [f"row {i} " + "w" * 2000 for i in range(80)]
        assert [i.text for i in rows["s2"]] == [f"late {i} " + "v" * 3000 for i in range(30)]
        assert [r.id for r in store.registry.load().sessions] == ["s1"]
    finally:
        store.close()
