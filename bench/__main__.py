"""`make bench`: run every benchmark module in bench/ (or those named on the command line)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    names = argv or sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))
    failed = 0
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        if not hasattr(module, "main"):
            continue
        print(f"\n=== bench/{name}.py ===", flush=True)
        started = time.perf_counter()
        try:
            module.main()
        except Exception as exc:  # noqa: BLE001 - report and go on with the others
            failed += 1
            print(f"FAILED: {type(exc).__name__}: {exc}", flush=True)
        print(f"({time.perf_counter() - started:.1f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
