"""Patterns compiled on their first use (domain/patterns.py, issue 25): a pattern compiled
later is the one ``re.compile`` makes, once; the modules of many patterns the dashboard imports
before its first frame compile only those the import itself uses."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from polypilot_tui.domain.patterns import compile_later


def test_a_pattern_is_compiled_on_its_first_use_once(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []
    real = re.compile

    def counting(pattern: str, flags: int = 0) -> re.Pattern[str]:
        compiled.append(pattern)
        return real(pattern, flags)

    monkeypatch.setattr(re, "compile", counting)
    word = compile_later(r"to+ken", re.IGNORECASE)
    assert compiled == []
    first = word()
    assert word() is first
    assert compiled == [r"to+ken"]
    assert first.flags & re.IGNORECASE
    assert first.fullmatch("TOOOKEN") is not None


COUNT_COMPILES = textwrap.dedent(
    """
    import re, sys

    real = re.compile
    compiled = []

    def counting(pattern, flags=0):
        compiled.append(sys._getframe(1).f_code.co_filename)
        return real(pattern, flags)

    re.compile = counting
    from polypilot_tui.domain import failures, hosts, safe_json
    from polypilot_tui.infra import redact, secret_shapes

    mine = {m.__file__: m.__name__ for m in (failures, hosts, safe_json, secret_shapes)}
    print(sorted(mine[f] for f in compiled if f in mine))
    """
)


def test_the_redactor_failures_safe_json_and_hosts_compile_next_to_nothing_at_import() -> None:
    """Compiling them was ~20 ms of the dashboard's start, and before its first frame nothing
    redacts a text, names a failure or checks a host (and safe_json's scans run only on a file
    nested deep enough to need one). Only the three patterns of a secret's variable name are
    compiled at import: the redactor reads the environment with them as it is imported."""
    done = subprocess.run([sys.executable, "-c", COUNT_COMPILES], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == str(["polypilot_tui.infra.secret_shapes"] * 3)
