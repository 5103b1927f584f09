"""What the garbage collector walks among the objects a value holds.

A big value kept for long (a parsed diff, a layout, rows kept drawn) costs every full
collection a visit per object it tracks. Tests count them to keep that independent of size.
"""

from __future__ import annotations

import gc
from enum import Enum


def tracked_in(root: object) -> int:
    """How many objects reachable from ``root`` (itself included) the collector tracks, after a
    full collection (which stops tracking the tuples and dicts that hold nothing it tracks).
    Classes and enum members are shared, not held: they are neither counted nor followed."""
    gc.collect()
    seen: set[int] = set()
    todo = [root]
    count = 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type | Enum):
            continue
        seen.add(id(obj))
        count += gc.is_tracked(obj)
        todo.extend(gc.get_referents(obj))
    return count
