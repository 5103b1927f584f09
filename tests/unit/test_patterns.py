"""Patterns compiled on their first use (domain/patterns.py, issue 25): a pattern compiled
later is the one ``re.compile`` makes, once."""

from __future__ import annotations

import re

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
