"""The marks of a broadcast (ui/broadcast.py): ids, so order and closing do not move them; never
more than one broadcast reaches."""

from __future__ import annotations

from polypilot_tui.domain.fan_out import MAX_BROADCAST
from polypilot_tui.ui.broadcast import Marks


def test_marks_are_listed_in_the_order_given_and_leave_with_their_session() -> None:
    marks = Marks()
    for sid in ("c", "a", "b"):
        marks.toggle(sid)
    assert marks.in_order(["b", "x", "a", "c"]) == ["b", "a", "c"]  # the sidebar's order, whatever it is now
    assert marks.keep_only({"a", "c", "x"}) and marks.ids == {"a", "c"}
    assert not marks.keep_only({"a", "c"})  # nothing left: nothing to redraw
    assert marks.toggle("a") is False and marks.ids == {"c"}
    assert marks.clear() == 1 and not marks


def test_no_more_sessions_are_marked_than_one_broadcast_reaches() -> None:
    marks = Marks()
    assert marks.limit == MAX_BROADCAST
    for n in range(MAX_BROADCAST):
        assert marks.toggle(f"s{n}")
    assert marks.full and marks.toggle("one more") is False and "one more" not in marks
    assert marks.toggle("s0") is False and not marks.full  # unmarking still works
    assert marks.toggle("one more") is True
