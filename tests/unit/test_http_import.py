"""httpx without its command line at import (polypilot_tui/service/http.py, issue 25).

Each case is a fresh interpreter: what is imported is per process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_client_imports_httpx_without_its_command_line() -> None:
    said = run(
        """
        import sys
        from polypilot_tui.service import client
        from polypilot_tui.service.http import httpx
        print(sorted(m for m in ("click", "pygments", "rich", "httpx._main") if m in sys.modules))
        print(httpx.AsyncClient.__module__, client.httpx is httpx)
        """
    )
    assert said.splitlines() == ["[]", "httpx True"]


def test_httpx_command_line_still_runs_and_imports_the_real_module() -> None:
    said = run(
        """
        import sys
        from polypilot_tui.service.http import httpx
        try:
            httpx.main(["--help"])
        except SystemExit as exit:
            print("exit", exit.code)
        import httpx._main
        print(type(httpx._main.main).__name__)
        """
    )
    assert "A next generation HTTP client" in said
    assert said.splitlines()[-2:] == ["exit 0", "Command"]


def test_httpx_imported_before_keeps_its_own_command_line() -> None:
    said = run(
        """
        import sys
        import httpx
        from polypilot_tui.service.http import httpx as ours
        print(ours is httpx, type(httpx.main).__name__, "click" in sys.modules)
        """
    )
    assert said.split() == ["True", "Command", "True"]
