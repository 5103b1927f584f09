"""What waits for one stream client: in order, what a later record makes stale kept once, and
never more than its bound — past it, nothing at all and the reason why."""

from __future__ import annotations

from polypilot_tui.service.outbox import RECORD_COST, Deltas, Frame, Marker, Outbox


def kinds(box: Outbox) -> list[str]:
    out = []
    for entry in box.take():
        if isinstance(entry, Frame):
            out.append(entry.text)
        elif isinstance(entry, Marker):
            out.append(f"{entry.kind}:{entry.session_id}")
        else:
            out.append(f"{entry.type}:{''.join(entry.pieces)}")
    return out


def test_a_view_is_queued_once_and_moves_behind_what_came_after_it() -> None:
    box = Outbox(1 << 20)
    box.view("a")
    box.view("a")  # nothing came between: it stays where it is
    box.frame("row 1")
    box.view("b")
    box.view("a")  # rows came after it: it moves behind them
    assert kinds(box) == ["row 1", "view:b", "view:a"]
    assert box.records == 0 and not box


def test_a_row_replaced_before_it_went_out_goes_once_with_its_last_content_and_its_first_kind() -> None:
    box = Outbox(1 << 20)
    box.row(("a", 3), True, lambda added: f"{'added' if added else 'replaced'} v1")
    box.frame("turn ended")
    box.row(("a", 3), False, lambda added: f"{'added' if added else 'replaced'} v2")
    box.row(("a", 4), False, lambda added: f"{'added' if added else 'replaced'} other")
    box.row(("a", 4), False, lambda added: f"{'added' if added else 'replaced'} other v2")
    assert kinds(box) == ["added v2", "turn ended", "replaced other v2"]
    box.row(("a", 3), False, lambda added: "after the take: a new record")
    assert kinds(box) == ["after the take: a new record"]


def test_consecutive_deltas_of_one_kind_are_one_event_and_anything_between_splits_them() -> None:
    box = Outbox(1 << 20)
    base = {"messageId": "m1"}
    box.delta("assistant.message_delta", base, "Hel")
    box.delta("assistant.message_delta", dict(base), "lo ")
    box.delta("assistant.reasoning_delta", base, "hmm")
    box.delta("assistant.message_delta", {"messageId": "m2"}, "new message")
    box.delta("assistant.message_delta", {"messageId": "m2"}, ", on")
    box.frame("tool started")
    box.delta("assistant.message_delta", {"messageId": "m2"}, " and on")
    assert kinds(box) == [
        "assistant.message_delta:Hello ",
        "assistant.reasoning_delta:hmm",
        "assistant.message_delta:new message, on",
        "tool started",
        "assistant.message_delta: and on",
    ]
    entries = Outbox(1 << 20)
    entries.delta("assistant.message_delta", base, "x")
    (entry,) = entries.take()
    assert isinstance(entry, Deltas) and entry.base == base


def test_past_its_bytes_it_drops_everything_says_why_and_takes_nothing_until_taken() -> None:
    box = Outbox(10_000)
    for i in range(5):
        box.frame(f"record {i} " + "x" * 1000)
    assert box.records == 5 and not box.overflowed
    box.delta("assistant.message_delta", {}, "y" * 6000)
    assert box.records == 0 and box.bytes == 0
    assert box.overflowed == (
        "the client did not read: 6 records (11 KiB) were waiting, "
        "more than the 20000 records or 9 KiB one client may have"
    )
    box.frame("ignored while overflowed")
    box.view("a")
    assert box.records == 0 and box  # it has something to say: that it overflowed
    assert box.take() == [] and not box.overflowed
    box.frame("kept again")
    assert kinds(box) == ["kept again"]


def test_past_its_records_it_overflows_too_and_every_piece_of_text_counts() -> None:
    box = Outbox(1 << 30, max_records=100)
    for i in range(100):
        box.frame(str(i))
    assert not box.overflowed
    box.marker("session", "a")
    assert box.overflowed and box.records == 0
    pieces = Outbox(100 * (RECORD_COST + 1) + RECORD_COST)
    for _ in range(100):
        pieces.delta("assistant.message_delta", {}, "z")  # one record, 100 pieces: each costs
    assert not pieces.overflowed
    pieces.delta("assistant.message_delta", {}, "z" * 100)
    assert pieces.overflowed
