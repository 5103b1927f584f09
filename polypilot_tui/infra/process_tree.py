"""The processes below a process, read from Linux's /proc (none elsewhere).

A process may end, and be reaped, at any moment of the walk: a process whose folder cannot be
read by then (FileNotFoundError, ProcessLookupError, any OSError) has no children left, and the
walk goes on with the others. Used to end an agent with every process it started.
"""

from __future__ import annotations

import os


def children(pid: int) -> list[int]:
    """The children of ``pid`` (of each of its threads); none once it has ended."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # it ended (and was reaped) while we looked
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as file:
                found += [int(word) for word in file.read().split()]
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, each before its own children ([] once it has ended)."""
    if not _children_listed():
        return _descendants_by_parents(pid)
    found: list[int] = []
    seen = {pid}
    todo = [pid]
    while todo:
        for child in children(todo.pop()):
            if child not in seen:  # a pid reused meanwhile must not loop
                seen.add(child)
                found.append(child)
                todo.append(child)
    return found


def _children_listed() -> bool:
    """The kernel lists each thread's children (CONFIG_PROC_CHILDREN, as most do)."""
    return os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _descendants_by_parents(pid: int) -> list[int]:
    """:func:`descendants` on a kernel that does not list children: every process's parent read."""
    parents: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                raw = file.read()
            parents[int(entry)] = int(raw[raw.rindex(b")") + 2 :].split()[1])  # the name may hold ")"
        except (OSError, ValueError, IndexError):
            continue  # it ended meanwhile
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        kids = [child for child, parent in parents.items() if parent == current]
        found += kids
        todo += kids
    return found
