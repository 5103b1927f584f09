"""The sidebar's order: each orchestrator followed by its workers, indented, the rest as the
engine lists them.

Pure: the same views give the same order and depths, so ctrl+↑/↓ and the rows agree.
"""

from __future__ import annotations

from collections.abc import Sequence

from polypilot_tui.domain.view import SessionView

MAX_INDENT = 4
"""Levels a row is indented at most (a deeper tree still lists every worker, at this depth)."""


def sidebar_order(views: Sequence[SessionView]) -> list[tuple[SessionView, int]]:
    """Every view once, with its depth: a worker right under its orchestrator (its workers under
    it, and so on), in the engine's order among siblings; a worker whose orchestrator is not
    listed stays where the engine put it, at depth 0."""
    ids = {view.id for view in views}
    children: dict[str, list[SessionView]] = {}
    roots: list[SessionView] = []
    for view in views:
        if view.parent and view.parent in ids and view.parent != view.id:
            children.setdefault(view.parent, []).append(view)
        else:
            roots.append(view)
    order: list[tuple[SessionView, int]] = []
    placed: set[str] = set()
    # Roots first, then whatever a cycle of parents left unplaced (never made by the engine; listed all the same).
    for start in [*roots, *views]:
        stack = [(start, 0)]
        while stack:
            view, depth = stack.pop()
            if view.id in placed:
                continue
            placed.add(view.id)
            order.append((view, min(depth, MAX_INDENT)))
            stack.extend((child, depth + 1) for child in reversed(children.get(view.id, [])))
    return order
