"""``polypilot run`` against the bare Copilot CLI: one tool turn, wall time, fixed cost, memory.

Both run the pinned Copilot CLI (from npm) on the scripted model server (127.0.0.1) with
the same prompt (``please TOOL now``: a bash tool call, then a reply) and model, in the same
git checkout (a repository of 5,000 files, made once: a run works in a checkout, and what each
side asks git there is part of its cost):

- polypilot: ``python -m polypilot_tui run --allow-tools PROMPT`` (the ``polypilot`` command's
  entry point, with the bytecode an install has) with an agents file
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

Two turns, each run in alternating pairs:

- slow: every run in fresh homes (the CLI's first start on a machine, ~2-3 s): the ratio
  and the memory above;
- fast: each side's homes made once and kept (warmed before the rounds, as a user's are), so
  the CLI boots in well under a second and what we add on top shows: the fixed cost, the
  median of polypilot's wall minus the bare CLI's per round (target ≤ 0.15 s), beside two
  floors: the one no Python program avoids (``python -c pass`` in this venv, its ``site``
  included, alternated with the rounds), and the CLI's SDK mode itself — a third side, the
  same CLI, homes and model server driven over its stdio by bench/_raw_copilot.py (the SDK's
  requests, standard library only, no ``site``): its wall minus bare's per round is what
  serving a turn to an SDK costs the CLI over ``-p``, which no SDK-driven run gets below.
  Each round runs the three sides, the order turned by one each round. Its memory is not
  polled (the row reports none): a poll reads every process's /proc stat, ~2 ms of CPU every
  10 ms, and on two cores that slowed every side, ours most (10 alternated rounds, polled vs
  not: bare 0.736 vs 0.705 s, polypilot 0.856 vs 0.810 s, the fixed cost 0.126 vs 0.093 s).

Where the time goes (fast turn, medians), from outside: our start to the CLI's spawn (the
start times /proc gives the two processes), to the first model request (the model server's
clock; the bare CLI's own boot and session to compare), the first to the last model request
(the turn: the tool, its permission), the last model request to the exit. From inside, once
each (not timed with the pairs): the imports by group (``-X importtime``: before the spawn,
the engine, the SDK), and the SDK's steps on a CLI it started: spawn to the SDK imported, to
the handshake done, to the session created, to the client stopped.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench._support import Row, proc_kib
from bench.stop_latency import find_cli

if TYPE_CHECKING:
    from tests.support.model_server import ModelServer

PAIRS = 7
FAST_PAIRS = 9
CHECKOUT_FILES = 5_000
PROMPT = "please TOOL now"
TICK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = resource.getpagesize() // 1024
ROOT = Path(__file__).resolve().parents[1]


def proc_stats() -> Iterator[tuple[int, list[str]]]:
    """Every process now, with the fields of its /proc/PID/stat after the command's name
    (``fields[1]`` the parent, ``[19]`` the start tick, ``[21]`` resident pages)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                yield int(entry), fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile


def tree_memory(root: int, pss: bool) -> tuple[int, int]:
    """(PSS, RSS) in KiB of ``root`` and every process below it (a snapshot of /proc); PSS
    only when asked (0 otherwise): reading it walks the page tables of the process, ~3.5 ms
    for a CLI, which polled often would slow the very run it measures."""
    children: dict[int, list[int]] = {}
    resident: dict[int, int] = {}
    for pid, fields in proc_stats():
        children.setdefault(int(fields[1]), []).append(pid)  # fields[1] is the parent id
        resident[pid] = int(fields[21]) * PAGE_KIB  # field 24 of stat: resident pages
    total_pss = total_rss = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        total_pss += proc_kib(pid, "smaps_rollup", "Pss:") if pss else 0
        total_rss += resident.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total_pss, total_rss


def start_tick(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (/proc/PID/stat field 22), None once gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def first_child_tick(root: int) -> int | None:
    """The start tick of the earliest child of ``root`` (the CLI, or its leash that execs it)."""
    ticks = [int(fields[19]) for _pid, fields in proc_stats() if int(fields[1]) == root]
    return min(ticks) if ticks else None


@dataclass
class Timed:
    """One run: wall seconds, peak (PSS, RSS) KiB, when (monotonic) it started and ended, and
    how long after its start its first child (the CLI) started (None: it started none)."""

    wall: float
    peak: tuple[int, int]
    started: float
    ended: float
    spawned_after: float | None
    done: subprocess.CompletedProcess[str]


def timed(argv: list[str], env: dict[str, str], cwd: Path, memory: bool = True) -> Timed:
    """Run ``argv`` in ``cwd``; its wall seconds, the peak (PSS, RSS) KiB of its process tree
    (``memory``; else (0, 0)), when its first child started and its result. RSS is polled every
    10 ms, PSS every 100 ms; without ``memory``, only until the first child is seen: a poll reads
    every process's /proc stat (~2 ms of CPU), which every 10 ms on two cores slows the run it
    times."""
    peak_pss = peak_rss = 0
    child_tick: int | None = None
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    root_tick = start_tick(proc.pid)

    def poll() -> None:
        nonlocal peak_pss, peak_rss, child_tick
        for n in itertools.count():
            if proc.poll() is not None or (not memory and child_tick is not None):
                return
            if memory:
                pss, rss = tree_memory(proc.pid, pss=n % 10 == 0)
                peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
            if child_tick is None:
                child_tick = first_child_tick(proc.pid)
            time.sleep(0.01)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    out, err = proc.communicate(timeout=120)
    ended = time.perf_counter()
    watcher.join()
    spawned = (child_tick - root_tick) / TICK if child_tick is not None and root_tick is not None else None
    done = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    return Timed(ended - started, (peak_pss, peak_rss), started, ended, spawned, done)


def polypilot_argv_env(
    cli: Path, server_url: str, tmp: Path, work: Path, homes: Path | None = None
) -> tuple[list[str], dict[str, str]]:
    """``polypilot run`` in ``work`` with its state in ``tmp`` and its homes in ``homes`` (default ``tmp``)."""
    from tests.support.copilot_harness import AGENT, run_env

    homes = homes or tmp
    agents = tmp / "agents.toml"
    agents.write_text(
        f'[{AGENT}]\nkind = "copilot"\ncommand = "{cli}"\nmodel = "gpt-4.1"\ncwd = "{work}"\n'
        f'env = {{ COPILOT_HOME = "{homes / "copilot-home"}" }}\n'
        f'provider = {{ base_url = "{server_url}", api_key_env = "POLYPILOT_E2E_MODEL_KEY" }}\n'
    )
    home = homes / "home"
    env = run_env(tmp / "state", agents, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an install has its bytecode: never compile ours every run
    # The installed command's entry point (``polypilot`` is polypilot_tui.entry:command), not cli.py's.
    return [sys.executable, "-m", "polypilot_tui", "run", "--allow-tools", PROMPT], env


def bare_argv_env(
    cli: Path, server_url: str, tmp: Path, work: Path, homes: Path | None = None
) -> tuple[list[str], dict[str, str]]:
    """The bare ``copilot -p`` with its homes in ``homes`` (default ``tmp``); it works in its
    own folder, ``work``, where it is run."""
    from tests.support.copilot_e2e import KEY

    homes = homes or tmp
    env = {k: v for k, v in os.environ.items() if not k.startswith(("POLYPILOT_", "COPILOT_"))}
    env.update(
        HOME=str(homes / "home"),
        COPILOT_HOME=str(homes / "copilot-home"),
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=server_url,
        COPILOT_PROVIDER_API_KEY=KEY,
        COPILOT_MODEL="gpt-4.1",
    )
    return [str(cli), "-p", PROMPT, "--allow-all-tools"], env


def raw_argv_env(
    cli: Path, server_url: str, tmp: Path, work: Path, homes: Path | None = None
) -> tuple[list[str], dict[str, str]]:
    """The CLI in SDK mode driven by bench/_raw_copilot.py (stdlib, no ``site``) in ``work``, with
    the environment a ``polypilot run`` in these homes gives its CLI: the floor of the SDK mode."""
    from polypilot_tui.agents.copilot.cli_spec import cli_environment
    from polypilot_tui.config import AgentConfig, ProviderConfig
    from tests.support.copilot_e2e import KEY, KEY_ENV

    homes = homes or tmp
    agent = AgentConfig(
        name="raw",
        kind="copilot",
        command=str(cli),
        model="gpt-4.1",
        cwd=work,
        env={"COPILOT_HOME": str(homes / "copilot-home")},
        provider=ProviderConfig(base_url=server_url, api_key_env=KEY_ENV),
    )
    _argv, base = polypilot_argv_env(cli, server_url, tmp, work, homes)
    env, _provider = cli_environment(agent, base)
    env[KEY_ENV] = KEY
    script = str(Path(__file__).with_name("_raw_copilot.py"))
    return [sys.executable, "-I", "-S", script, str(work), "gpt-4.1", server_url, KEY_ENV, PROMPT, "--", str(cli)], env


def one(kind: str, cli: Path, server_url: str, work: Path, homes: Path | None = None, memory: bool = True) -> Timed:
    """One fresh run of ``kind`` in the checkout ``work``, in its own temporary homes unless
    ``homes`` are given (kept across runs), its memory polled if ``memory``; fails loudly if the
    turn did."""
    with tempfile.TemporaryDirectory(prefix=f"polypilot-bench-run-{kind}-") as name:
        tmp = Path(name)
        (homes or tmp).joinpath("home").mkdir(exist_ok=True)
        argv, env = MAKERS[kind](cli, server_url, tmp, work, homes)
        run = timed(argv, env, work, memory)
    if run.done.returncode != 0 or "done:" not in run.done.stdout:
        raise RuntimeError(
            f"{kind} run failed ({run.done.returncode}): {run.done.stdout[-500:]} {run.done.stderr[-1500:]}"
        )
    return run


MAKERS = {"polypilot": polypilot_argv_env, "bare": bare_argv_env, "sdk floor": raw_argv_env}
"""Each side's command line: ours, the bare ``copilot -p``, and the CLI's SDK mode on its own."""


def python_start() -> float:
    """The wall seconds of ``python -c pass`` in this venv (its ``site`` included): the floor."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def fast_turn(cli: Path, server: ModelServer, work: Path, pairs: int) -> Row:
    """The fast turn (warm homes), its fixed cost, the floors it is measured against and
    where the time goes. Each round runs the three sides (polypilot, bare, the SDK mode on its
    own), the order turned by one each round."""
    kinds = ("polypilot", "bare", "sdk floor")
    walls: dict[str, list[float]] = {kind: [] for kind in kinds}
    costs: list[float] = []
    sdk_costs: list[float] = []
    floors: list[float] = []
    phases: dict[str, list[float]] = {}

    def note(name: str, seconds: float) -> None:
        phases.setdefault(name, []).append(seconds)

    with tempfile.TemporaryDirectory(prefix="polypilot-bench-homes-") as name:
        homes = {kind: Path(name) / kind.replace(" ", "-") for kind in kinds}
        for kind, where in homes.items():
            where.mkdir()
            one(kind, cli, server.base_url, work, where, memory=False)  # warm: the CLI's first start there
        for i in range(pairs):
            order = kinds[i % 3 :] + kinds[: i % 3]
            got: dict[str, Timed] = {}
            for kind in order:
                seen = len(server.model_requests())
                run = got[kind] = one(kind, cli, server.base_url, work, homes[kind], memory=False)
                asked = [r.at for r in server.model_requests()[seen:]]
                walls[kind].append(run.wall)
                if kind == "polypilot" and run.spawned_after is not None:  # the bare CLI is its own root
                    note(f"{kind}: start to the CLI's spawn", run.spawned_after)
                note(f"{kind}: start to the first model request", asked[0] - run.started)
                note(f"{kind}: first to last model request", asked[-1] - asked[0])
                note(f"{kind}: last model request to the exit", run.ended - asked[-1])
            floors.append(python_start())
            costs.append(got["polypilot"].wall - got["bare"].wall)
            sdk_costs.append(got["sdk floor"].wall - got["bare"].wall)
            print(
                f"fast round {i + 1}: polypilot {got['polypilot'].wall:.2f} s, bare {got['bare'].wall:.2f} s, "
                f"SDK mode alone {got['sdk floor'].wall:.2f} s; fixed cost {costs[-1]:+.2f} s",
                flush=True,
            )
    for label, values in phases.items():
        print(f"  {label}: median {statistics.median(values):.3f} s")
    cost, floor, sdk_cost = statistics.median(costs), statistics.median(floors), statistics.median(sdk_costs)
    ours, bare = statistics.median(walls["polypilot"]), statistics.median(walls["bare"])
    print(
        f"fast turn (warm homes), {pairs} rounds: polypilot {ours:.2f} s, bare {bare:.2f} s; fixed cost "
        f"{cost:.2f} s (target ≤ 0.15 s); floors: python -c pass {floor:.3f} s, the CLI's SDK mode "
        f"(bench/_raw_copilot.py) over bare {sdk_cost:+.3f} s"
    )
    figure = (
        f"{cost:.2f} s ({ours:.2f} s vs {bare:.2f} s); floors: Python's start {floor:.2f} s, "
        f"the CLI's SDK mode {sdk_cost:+.2f} s"
    )
    return ("`polypilot run` fixed cost over bare `copilot -p`, fast tool turn (warm homes)", figure, "≤ 0.15 s")


IMPORT_GROUPS = (
    ("the SDK", ("copilot", "dateutil")),
    ("the engine", ("polypilot_tui.engine", "polypilot_tui.storage", "polypilot_tui.workspace")),
    ("the rest of ours", ("polypilot_tui",)),
    ("pydantic", ("pydantic", "annotated_types", "typing_")),
)


def import_breakdown(cli: Path, server: ModelServer, work: Path) -> None:
    """One run under ``-X importtime``: each module's own import time, summed by group (the
    SDK imports in a thread, so the nesting, and each cumulative figure, mixes both threads)."""
    with tempfile.TemporaryDirectory(prefix="polypilot-bench-imports-") as name:
        tmp = Path(name)
        (tmp / "home").mkdir()
        argv, env = polypilot_argv_env(cli, server.base_url, tmp, work)
        done = subprocess.run(
            [argv[0], "-X", "importtime", *argv[1:]], cwd=work, env=env, capture_output=True, text=True, timeout=120
        )
    totals: dict[str, float] = {}
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if not line.startswith("import time:") or len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        module = parts[2].strip()
        group = next((g for g, prefixes in IMPORT_GROUPS if module.startswith(prefixes)), "the standard library, other")
        totals[group] = totals.get(group, 0.0) + int(parts[0]) / 1e6
    shown = ", ".join(f"{group} {seconds:.3f} s" for group, seconds in totals.items())
    print(f"  imports (-X importtime, one run, own time summed): {shown}")


async def sdk_steps(cli: Path, server: ModelServer) -> dict[str, float]:
    """The SDK's steps on a CLI it starts (the run's path: HeadStart, then a session)."""
    from polypilot_tui.agents.copilot.cli_spec import cli_environment, spec_of
    from polypilot_tui.agents.copilot.runtime import kill_tree
    from polypilot_tui.agents.copilot.server import CopilotServer
    from tests.support.copilot_e2e import copilot_agent

    with tempfile.TemporaryDirectory(prefix="polypilot-bench-sdk-") as name:
        tmp = Path(name)
        agent = copilot_agent(cli, server, tmp / "copilot-home", tmp / "work")
        env, provider = cli_environment(agent, os.environ)
        copilot = CopilotServer(spec_of(agent, str(cli), env, logged_in=provider is None), asyncio.get_running_loop())
        started = time.perf_counter()
        imported = copilot.boot()
        try:
            await imported
            sdk_in = time.perf_counter()
            await copilot.launch(imported)
            handshake = time.perf_counter()
            session = await copilot.client.create_session(
                on_permission_request=lambda *_: None,
                working_directory=str(tmp / "work"),
                provider=provider,
                model=agent.model,
                streaming=True,
            )
            created = time.perf_counter()
            await session.disconnect()
            await copilot.client.stop()
            stopped = time.perf_counter()
        finally:
            if copilot.proc is not None:
                kill_tree(copilot.proc)
    return {
        "spawn to the SDK imported": sdk_in - started,
        "to the handshake done": handshake - sdk_in,
        "to the session created": created - handshake,
        "the client's stop": stopped - created,
    }


def main(pairs: int = PAIRS, fast_pairs: int = FAST_PAIRS) -> list[Row]:
    if str(ROOT) not in sys.path:  # tests.support (model server) lives beside bench/
        sys.path.insert(0, str(ROOT))
    from bench.change_stats import make_repo
    from tests.support.model_server import ModelServer

    cli = find_cli()
    if cli is None:
        return []
    with ModelServer(max_seconds=1800) as server, tempfile.TemporaryDirectory(prefix="polypilot-bench-co-") as name:
        work = make_repo(Path(name), CHECKOUT_FILES, CHECKOUT_FILES // 50)
        one("bare", cli, server.base_url, work)  # warm the page cache for both; not counted
        one("polypilot", cli, server.base_url, work)
        rows = [slow_turn(cli, server, work, pairs), fast_turn(cli, server, work, fast_pairs)]
        import_breakdown(cli, server, work)
        steps = asyncio.run(sdk_steps(cli, server))
    print("  the SDK on a CLI it starts: " + ", ".join(f"{step} {seconds:.3f} s" for step, seconds in steps.items()))
    return rows


def slow_turn(cli: Path, server: ModelServer, work: Path, pairs: int) -> Row:
    """The slow turn (fresh homes every run): the ratio and the peak memory."""
    walls: dict[str, list[float]] = {"polypilot": [], "bare": []}
    peaks: dict[str, list[tuple[int, int]]] = {"polypilot": [], "bare": []}
    ratios: list[float] = []
    for i in range(pairs):
        order = ("polypilot", "bare") if i % 2 == 0 else ("bare", "polypilot")
        got: dict[str, Timed] = {}
        for kind in order:
            got[kind] = one(kind, cli, server.base_url, work)
            walls[kind].append(got[kind].wall)
            peaks[kind].append(got[kind].peak)
        ratios.append(got["polypilot"].wall / got["bare"].wall)
        print(
            f"pair {i + 1}: polypilot {got['polypilot'].wall:.2f} s, bare {got['bare'].wall:.2f} s, "
            f"ratio {ratios[-1]:.2f}x",
            flush=True,
        )
    print(f"Copilot CLI {cli.parent.name}/{cli.name}, prompt {PROMPT!r}, {pairs} pairs, alternating, fresh homes")
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
    return ("`polypilot run` vs bare `copilot -p`, one tool turn (real CLI, fresh homes)", figure, "≤ 1.2x, ≤ +80 MiB")


if __name__ == "__main__":
    main()
