"""Usage as the dashboard shows it: ``12.3k in · 1.2k out · ctx 18% · $0.04``.

Only the parts an agent reported are shown, so an agent that reports only its context window
shows only ``ctx 9%``, and one that reports nothing shows nothing. The figures are numbers
and a checked currency code (domain/usage.py), so the text carries no agent-written words.
"""

from __future__ import annotations

from polypilot_tui.domain.usage import Usage

_UNITS = ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "k"))


def compact_count(count: int) -> str:
    """``950``, ``12.3k``, ``123k``, ``4.5M``: at most four characters of digits."""
    for size, unit in _UNITS:
        if count >= size - size // 2000:  # 999,999 is "1M", not "1000k"
            value = count / size
            if round(value, 1) < 100:
                return f"{value:.1f}".removesuffix(".0") + unit
            return f"{round(value)}{unit}"
    return str(count)


def money(amount: float, currency: str) -> str:
    """``$0.04``, ``<$0.01``, ``1.20 EUR``: cents, and never a non-zero spend shown as zero."""
    if 0 < amount < 0.01:
        return "<" + money(0.01, currency)
    return f"${amount:.2f}" if currency == "USD" else f"{amount:.2f} {currency}"


def usage_summary(usage: Usage) -> str:
    """One session's usage in one short line ("" when its agent reported none)."""
    if not usage.reported:
        return ""
    parts: list[str] = []
    if usage.input_tokens or usage.output_tokens:
        cached = f" ({compact_count(usage.cached_tokens)} cached)" if usage.cached_tokens else ""
        parts.append(f"{compact_count(usage.input_tokens)} in{cached}")
        parts.append(f"{compact_count(usage.output_tokens)} out")
    share = usage.context_share
    if share is not None:
        parts.append(f"ctx {round(share * 100)}%")
    elif usage.context_used is not None:
        parts.append(f"ctx {compact_count(usage.context_used)}")
    if usage.cost is not None:
        parts.append(money(usage.cost, usage.currency))
    return " · ".join(parts)


def fleet_summary(usage: Usage) -> str:
    """Every session's usage together, for the title bar ("" when no agent reported any)."""
    parts: list[str] = []
    if usage.total_tokens:
        parts.append(f"{compact_count(usage.total_tokens)} tokens")
    if usage.cost is not None:
        parts.append(money(usage.cost, usage.currency))
    return " · ".join(parts)
