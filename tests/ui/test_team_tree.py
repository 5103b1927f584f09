"""The sidebar's order of a team (ui/team_tree.py): workers right under their orchestrator, nested
by depth, the engine's order kept among siblings and for everything else; every view listed
once, whatever the parents say."""

from __future__ import annotations

from polypilot_tui.domain.view import SessionStatus, SessionView
from polypilot_tui.ui.team_tree import MAX_INDENT, sidebar_order


def view(sid: str, parent: str = "") -> SessionView:
    return SessionView(id=sid, name=sid, agent="demo", status=SessionStatus.IDLE, reason="", revision=1, parent=parent)


def order(*views: SessionView) -> list[tuple[str, int]]:
    return [(v.id, depth) for v, depth in sidebar_order(views)]


def test_workers_follow_their_orchestrator_nested_in_the_engines_order() -> None:
    views = [view("o"), view("x"), view("w1", "o"), view("w2", "o"), view("w1a", "w1"), view("y")]
    assert order(*views) == [("o", 0), ("w1", 1), ("w1a", 2), ("w2", 1), ("x", 0), ("y", 0)]


def test_a_worker_whose_orchestrator_is_not_listed_stays_where_it_is() -> None:
    assert order(view("a"), view("w", "gone"), view("b")) == [("a", 0), ("w", 0), ("b", 0)]


def test_parents_in_a_circle_or_of_itself_still_list_each_view_once() -> None:
    assert order(view("self", "self"), view("p", "q"), view("q", "p")) == [("self", 0), ("p", 0), ("q", 1)]


def test_a_deep_tree_is_indented_at_most_max_indent() -> None:
    chain = [view("n0")] + [view(f"n{i}", f"n{i - 1}") for i in range(1, MAX_INDENT + 4)]
    depths = [depth for _, depth in order(*chain)]
    assert depths == [min(i, MAX_INDENT) for i in range(len(chain))]
