"""Usage in words (ui/usage_text.py): compact counts, money, and only the parts reported."""

from __future__ import annotations

import pytest

from polypilot_tui.domain.usage import Usage
from polypilot_tui.ui.usage_text import compact_count, fleet_summary, money, usage_summary


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0"),
        (950, "950"),
        (999, "999"),
        (1_000, "1k"),
        (12_345, "12.3k"),
        (99_949, "99.9k"),
        (99_950, "100k"),
        (123_456, "123k"),
        (999_499, "999k"),
        (999_999, "1M"),
        (4_560_000, "4.6M"),
        (2 * 10**9, "2B"),
        (10**12, "1T"),
    ],
)
def test_compact_count(count: int, text: str) -> None:
    assert compact_count(count) == text


def test_money_never_shows_a_spend_as_zero() -> None:
    assert (money(0.0, "USD"), money(0.004, "USD"), money(0.04, "USD"), money(1.2, "EUR")) == (
        "$0.00",
        "<$0.01",
        "$0.04",
        "1.20 EUR",
    )


def test_only_the_reported_parts_are_shown() -> None:
    assert usage_summary(Usage()) == "" and fleet_summary(Usage()) == ""
    context_only = Usage(context_used=11_135, context_size=258_400, reported=True)
    assert usage_summary(context_only) == "ctx 4%"
    assert usage_summary(Usage(context_used=900, reported=True)) == "ctx 900"
    full = Usage(12_300, 1_200, 0, 23_040, 128_000, 0.04, "USD", 0.04, True)
    assert usage_summary(full) == "12.3k in · 1.2k out · ctx 18% · $0.04"
    assert fleet_summary(full) == "13.5k tokens · $0.04"
