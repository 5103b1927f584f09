"""Change counts on a big repository, against git alone.

A repository of 50,000 files (in 500 folders) is made with the git CLI in a temporary
folder, then a session's worktree changes 200 of them, deletes 20, renames 10 and adds 30
new files. Timed alternately, one run of each side after the other, medians of both:

- git:   ``git diff --stat <base>`` alone — the floor (git must look at every file);
- ours:  :func:`change_stats` — what the sidebar calls after each turn (``diff --numstat``,
  untracked files listed and their lines counted), awaited in one running event loop run as
  the engine runs its own (``infra/event_loop.run``).

The ratio ours/git is printed (target ≤ 1.3x), and the CPU time of each side's processes.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench._support import Row, ms_ratio
from polypilot_tui.infra import event_loop

FILES = 50_000
FOLDERS = 500
RUNS = 25
IDENTITY = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "b@x.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "b@x.invalid",
}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **IDENTITY}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def make_repo(root: Path, files: int = FILES, folders: int = FOLDERS) -> Path:
    """A repository of ``files`` small Python files in ``folders`` folders, one commit."""
    repo = root / "big"
    repo.mkdir()
    git(repo, "init", "--quiet", "-b", "main")
    per = files // folders
    for folder in range(folders):
        sub = repo / f"pkg{folder:03d}"
        sub.mkdir()
        for index in range(per):
            (sub / f"mod{index:03d}.py").write_text(f"# module {folder}/{index}\nVALUE = {index}\n")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "big")
    return repo


def alternate(floor: Callable[[], object], ours: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """Median seconds of ``floor`` and of ``ours``, run one after the other RUNS times (a busy
    moment of the shared machine lands on both sides)."""

    async def timed() -> tuple[list[float], list[float]]:
        floors, ourses = [], []
        for _ in range(RUNS):
            started = time.perf_counter()
            floor()
            floors.append(time.perf_counter() - started)
            started = time.perf_counter()
            await ours()
            ourses.append(time.perf_counter() - started)
        return floors, ourses

    floors, ourses = event_loop.run(timed())
    return statistics.median(floors), statistics.median(ourses)


def children_cpu_ms(fn: Callable[[], object]) -> float:
    """CPU time (user + system) of the processes ``fn`` runs and waits for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    fn()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000


def main() -> list[Row]:
    from polypilot_tui.workspace.changes import change_stats
    from polypilot_tui.workspace.worktrees import create_worktree, inspect_folder

    with tempfile.TemporaryDirectory(prefix="polypilot-bench-stats-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        repo = make_repo(root)
        print(f"repository: {FILES:,} files in {FOLDERS} folders, made in {time.perf_counter() - started:.1f} s")

        async def worktree() -> object:
            return await create_worktree(await inspect_folder(str(repo)), "bench", "", root / "wt")

        tree = event_loop.run(worktree())
        folder = Path(tree.folder)  # type: ignore[attr-defined]
        for index in range(200):
            path = folder / f"pkg{index:03d}" / "mod000.py"
            path.write_text(path.read_text() + "EXTRA = True\n")
        for index in range(20):
            (folder / f"pkg{300 + index:03d}" / "mod001.py").unlink()
        for index in range(10):
            git(folder, "mv", f"pkg{400 + index:03d}/mod002.py", f"pkg{400 + index:03d}/moved.py")
        for index in range(30):
            (folder / f"new{index}.py").write_text("print('new')\n" * 10)

        def floor_run() -> None:
            git(folder, "diff", "--stat", tree.base_commit)  # type: ignore[attr-defined]

        stats = event_loop.run(change_stats(tree))  # type: ignore[arg-type]
        floor, ours = alternate(floor_run, lambda: change_stats(tree))  # type: ignore[arg-type]
        floor_cpu = children_cpu_ms(floor_run)
        ours_cpu = children_cpu_ms(lambda: event_loop.run(change_stats(tree)))  # type: ignore[arg-type]
        print(f"changes found: {stats.short()}")
        print(f"git diff --stat alone: {floor * 1000:.0f} ms (median of {RUNS}), its CPU {floor_cpu:.0f} ms")
        print(f"change_stats:          {ours * 1000:.0f} ms (median of {RUNS}), its processes' CPU {ours_cpu:.0f} ms")
        print(f"ratio: {ours / floor:.2f}x git (target <= 1.3x)")
    figure = ms_ratio(ours * 1000, floor * 1000)
    return [(f"change stats of a worktree ({FILES:,} files) vs `git diff --stat`", figure, "≤ 1.3x")]
