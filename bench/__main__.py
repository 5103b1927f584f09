"""Run every bench module (each has ``main(argv) -> int``); exit non-zero if any failed."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import bench


def main() -> int:
    failed = []
    for info in sorted(pkgutil.iter_modules(bench.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        print(f"== bench.{info.name}", flush=True)
        start = time.perf_counter()
        try:
            code = importlib.import_module(f"bench.{info.name}").main([])
        except Exception as exc:  # noqa: BLE001 - report and run the others
            print(f"bench.{info.name} crashed: {exc!r}", file=sys.stderr)
            code = 1
        print(f"== bench.{info.name}: exit {code} in {time.perf_counter() - start:.1f} s\n", flush=True)
        if code:
            failed.append(info.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
