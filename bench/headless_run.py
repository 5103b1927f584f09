"""``polypilot run`` against the bare Copilot CLI: one tool turn, wall time and peak memory.

Both run the pinned Copilot CLI (from npm) on the scripted model server (127.0.0.1) with
the same prompt (``please TOOL now``: a bash tool call, then a reply) and model:

- polypilot: ``python -m polypilot_tui.cli run --allow-tools PROMPT`` with an agents file
  (kind ``copilot``, the model server as BYOK provider) and its own state folder;
- bare:      ``COPILOT_OFFLINE=true COPILOT_PROVIDER_BASE_URL=… COPILOT_MODEL=gpt-4.1
  copilot -p PROMPT --allow-all-tools``.

Every run is a fresh process with its own temporary HOME and COPILOT_HOME; the two are
run in pairs, alternating which goes first, so a load change on the (shared) machine hits
both alike. Reported: the median wall of each, the ratio per pair and its median, and the
peak memory of each process tree (the sum over the process and its descendants, polled from
/proc: RSS every 10 ms, PSS every 100 ms) as PSS, which splits a page among the processes that
share it, and as RSS.
The target is on PSS: the CLI forks before it execs each tool or shell, and for that moment
the child's RSS counts every page it shares with the CLI again (a 276 MiB "second CLI" was
caught in one run of four), so an RSS sum reports memory nothing uses. Skips (with the
reason) when the CLI is missing.
"""

from __future__ import annotations

import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench._support import Row, proc_kib
from bench.stop_latency import find_cli

PAIRS = 7
PROMPT = "please TOOL now"
PAGE_KIB = resource.getpagesize() // 1024
ROOT = Path(__file__).resolve().parents[1]


def tree_memory(root: int, pss: bool) -> tuple[int, int]:
    """(PSS, RSS) in KiB of ``root`` and every process below it (a snapshot of /proc); PSS
    only when asked (0 otherwise): reading it walks the page tables of the process, ~3.5 ms
    for a CLI, which polled often would slow the very run it measures."""
    children: dict[int, list[int]] = {}
    resident: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))  # fields[1] is the parent id
        resident[int(entry)] = int(fields[21]) * PAGE_KIB  # field 24 of stat: resident pages
    total_pss = total_rss = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        total_pss += proc_kib(pid, "smaps_rollup", "Pss:") if pss else 0
        total_rss += resident.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total_pss, total_rss


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, tuple[int, int], subprocess.CompletedProcess[str]]:
    """Run ``argv``; its wall seconds, the peak (PSS, RSS) KiB of its process tree and its result.
    RSS is polled every 10 ms, PSS every 100 ms."""
    peak_pss = peak_rss = 0
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def poll() -> None:
        nonlocal peak_pss, peak_rss
        for n in itertools.count():
            if proc.poll() is not None:
                return
            pss, rss = tree_memory(proc.pid, pss=n % 10 == 0)
            peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
            time.sleep(0.01)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    out, err = proc.communicate(timeout=120)
    wall = time.perf_counter() - started
    watcher.join()
    return wall, (peak_pss, peak_rss), subprocess.CompletedProcess(argv, proc.returncode, out, err)


def polypilot_argv_env(cli: Path, server_url: str, tmp: Path) -> tuple[list[str], dict[str, str]]:
    from tests.support.copilot_harness import AGENT, run_env

    agents = tmp / "agents.toml"
    work = tmp / "work"
    work.mkdir()
    agents.write_text(
        f'[{AGENT}]\nkind = "copilot"\ncommand = "{cli}"\nmodel = "gpt-4.1"\ncwd = "{work}"\n'
        f'env = {{ COPILOT_HOME = "{tmp / "copilot-home"}" }}\n'
        f'provider = {{ base_url = "{server_url}", api_key_env = "POLYPILOT_E2E_MODEL_KEY" }}\n'
    )
    env = run_env(tmp / "state", agents, HOME=str(tmp / "home"), XDG_CONFIG_HOME=str(tmp / "home" / ".config"))
    return [sys.executable, "-m", "polypilot_tui.cli", "run", "--allow-tools", PROMPT], env


def bare_argv_env(cli: Path, server_url: str, tmp: Path) -> tuple[list[str], dict[str, str]]:
    from tests.support.copilot_e2e import KEY

    env = {k: v for k, v in os.environ.items() if not k.startswith(("POLYPILOT_", "COPILOT_"))}
    env.update(
        HOME=str(tmp / "home"),
        COPILOT_HOME=str(tmp / "copilot-home"),
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=server_url,
        COPILOT_PROVIDER_API_KEY=KEY,
        COPILOT_MODEL="gpt-4.1",
    )
    return [str(cli), "-p", PROMPT, "--allow-all-tools"], env


def one(kind: str, cli: Path, server_url: str) -> tuple[float, tuple[int, int]]:
    """One fresh run of ``kind`` in its own temporary homes; fails loudly if the turn did."""
    with tempfile.TemporaryDirectory(prefix=f"polypilot-bench-run-{kind}-") as name:
        tmp = Path(name)
        (tmp / "home").mkdir()
        make = polypilot_argv_env if kind == "polypilot" else bare_argv_env
        argv, env = make(cli, server_url, tmp)
        wall, peak, done = timed(argv, env)
    if done.returncode != 0 or "done:" not in done.stdout:
        raise RuntimeError(f"{kind} run failed ({done.returncode}): {done.stdout[-500:]} {done.stderr[-1500:]}")
    return wall, peak


def main(pairs: int = PAIRS) -> list[Row]:
    if str(ROOT) not in sys.path:  # tests.support (model server) lives beside bench/
        sys.path.insert(0, str(ROOT))
    from tests.support.model_server import ModelServer

    cli = find_cli()
    if cli is None:
        return []
    walls: dict[str, list[float]] = {"polypilot": [], "bare": []}
    peaks: dict[str, list[tuple[int, int]]] = {"polypilot": [], "bare": []}
    ratios: list[float] = []
    with ModelServer(max_seconds=1800) as server:
        one("bare", cli, server.base_url)  # warm the page cache for both; not counted
        one("polypilot", cli, server.base_url)
        for i in range(pairs):
            order = ("polypilot", "bare") if i % 2 == 0 else ("bare", "polypilot")
            got = {}
            for kind in order:
                got[kind] = one(kind, cli, server.base_url)
                walls[kind].append(got[kind][0])
                peaks[kind].append(got[kind][1])
            ratios.append(got["polypilot"][0] / got["bare"][0])
            print(
                f"pair {i + 1}: polypilot {got['polypilot'][0]:.2f} s, bare {got['bare'][0]:.2f} s, "
                f"ratio {ratios[-1]:.2f}x",
                flush=True,
            )
    print(f"Copilot CLI {cli.parent.name}/{cli.name}, prompt {PROMPT!r}, {pairs} pairs, alternating")
    medians = {}
    for kind in ("polypilot", "bare"):
        pss, rss = (statistics.median(peak[i] for peak in peaks[kind]) / 1024 for i in (0, 1))
        medians[kind] = (pss, rss)
        print(
            f"{kind:9}: wall median {statistics.median(walls[kind]):.2f} s (min {min(walls[kind]):.2f}); "
            f"peak memory of the tree, medians: PSS {pss:.0f} MiB, RSS {rss:.0f} MiB"
        )
    extra_pss, extra_rss = (medians["polypilot"][i] - medians["bare"][i] for i in (0, 1))
    print(
        f"ratio polypilot/bare: median {statistics.median(ratios):.2f}x (target ≤ 1.2x); "
        f"PSS +{extra_pss:.0f} MiB (RSS +{extra_rss:.0f} MiB)"
    )
    ours, bare = statistics.median(walls["polypilot"]), statistics.median(walls["bare"])
    figure = (
        f"{ours:.2f} s vs {bare:.2f} s: {statistics.median(ratios):.2f}x; "
        f"peak PSS +{extra_pss:.0f} MiB (RSS +{extra_rss:.0f})"
    )
    return [("`polypilot run` vs bare `copilot -p`, one tool turn (real CLI)", figure, "≤ 1.2x, ≤ +80 MiB")]


if __name__ == "__main__":
    main()
