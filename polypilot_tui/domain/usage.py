"""What a session's agent reported it used: tokens, context window and cost, as one frozen value.

Agents report usage in three shapes, and each is folded its own way so nothing is counted twice
(measured with the real agents against the scripted model):

- ``assistant.usage`` is per model call (Copilot) or per turn (ACP turn end: opencode reports
  its turn's last model call; codex-acp reports none): its input, output and cache-read tokens
  are **summed**.
- ``session.usage_info`` is the context window now (Copilot ``currentTokens``/``tokenLimit``,
  ACP ``usage_update`` ``used``/``size``): the **latest** report wins.
- The ACP ``usage_update`` cost is the agent session's **cumulative** cost: only its growth is
  added, so a report repeated every turn is not summed again and a counter that starts over
  (a new agent session) adds its new total. Costs are kept in one currency (the first seen);
  a report in another is left out rather than added as if it were the same money. Copilot's
  ``cost`` has no currency (a billing multiplier, not money) and is not counted.

Every figure comes from the agent and is untrusted: anything but a finite, non-negative,
plausible number (a bool, a string, NaN, a negative or absurd value) is ignored, never raised on.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from typing import Any

from polypilot_tui.domain.dataclass_on_use import dataclass

MAX_TOKENS = 10**12
"""Beyond any real count (a trillion tokens): a bigger figure is garbage, not usage."""
MAX_COST = 10**7
"""Beyond any real session's cost, in any currency."""

_CURRENCY = re.compile(r"[A-Z]{3}")
_TURN_USAGE = "assistant.usage"
_CONTEXT_USAGE = "session.usage_info"
_CACHE_READ_KEYS = ("cacheReadTokens", "cachedReadTokens")  # Copilot, ACP


@dataclass(frozen=True, slots=True)
class Usage:
    """Usage figures of one session (or, summed, of the fleet)."""

    input_tokens: int = 0
    """Input (prompt) tokens, summed over the model calls or turns reported."""
    output_tokens: int = 0
    """Output (completion) tokens, summed likewise."""
    cached_tokens: int = 0
    """Input tokens read from the provider's cache (part of ``input_tokens``), summed."""
    context_used: int | None = None
    """Tokens in the context window at the latest report (None: never reported)."""
    context_size: int | None = None
    """The context window's size at the latest report (None: never reported)."""
    cost: float | None = None
    """Money spent, in ``currency`` (None: no cost reported)."""
    currency: str = ""
    """ISO 4217 code of ``cost`` ("" when none)."""
    cost_mark: float | None = None
    """The agent's last cumulative cost report; the next one adds only what it grew by."""
    reported: bool = False
    """The agent reported at least one usable figure."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def context_share(self) -> float | None:
        """How full the context window is, 0..1 (None unless both figures were reported)."""
        if self.context_used is None or not self.context_size:
            return None
        return min(1.0, self.context_used / self.context_size)

    def to_json(self) -> dict[str, Any]:
        """The figures for ``status --json`` (without the bookkeeping of cumulative reports)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "cost_mark"}

    def fold(self, kind: str, data: Mapping[str, Any]) -> Usage:
        """This usage with one usage event of type ``kind`` folded in (unchanged if it has nothing usable)."""
        if kind == _TURN_USAGE:
            return self._with_call(data)
        if kind == _CONTEXT_USAGE:
            return self._with_context(data)
        return self  # the CLI-only session.usage_record: calls are summed from assistant.usage alone

    def _with_call(self, data: Mapping[str, Any]) -> Usage:
        given = {
            "input_tokens": _count(data.get("inputTokens")),
            "output_tokens": _count(data.get("outputTokens")),
            "cached_tokens": next((n for k in _CACHE_READ_KEYS if (n := _count(data.get(k))) is not None), None),
        }
        sums: dict[str, Any] = {name: _bounded(getattr(self, name) + n) for name, n in given.items() if n is not None}
        return replace(self, **sums, reported=True) if sums else self

    def _with_context(self, data: Mapping[str, Any]) -> Usage:
        used, size = _count(data.get("currentTokens")), _count(data.get("tokenLimit"))
        changes: dict[str, Any] = {}
        if used is not None:
            changes["context_used"] = used
        if size is not None:
            changes["context_size"] = size
        cost = data.get("cost")
        if isinstance(cost, Mapping):
            changes.update(self._cost_changes(cost.get("amount"), cost.get("currency")))
        return replace(self, **changes, reported=True) if changes else self

    def new_counter(self) -> Usage:
        """The same figures, for an agent whose cumulative cost starts again from zero."""
        return replace(self, cost_mark=None)

    def _cost_changes(self, amount: Any, currency: Any) -> dict[str, Any]:
        total = _money(amount)
        code = currency.strip().upper() if isinstance(currency, str) else ""
        if total is None or not _CURRENCY.fullmatch(code) or (self.currency and code != self.currency):
            return {}
        mark = self.cost_mark
        grown = total - mark if mark is not None and total >= mark else total  # lower: a new counter
        return {"cost": min(MAX_COST, (self.cost or 0.0) + grown), "currency": code, "cost_mark": total}


def fleet_usage(usages: Iterable[Usage]) -> Usage:
    """The sum over sessions: tokens added up; cost only when every reported cost is in one
    currency (no sum of dollars and euros); no context figures (they are per session)."""
    reported = [u for u in usages if u.reported]
    currencies = {u.currency for u in reported if u.cost is not None}
    cost = None
    if len(currencies) == 1:
        cost = min(MAX_COST, sum(u.cost or 0.0 for u in reported))
    return Usage(
        input_tokens=_bounded(sum(u.input_tokens for u in reported)),
        output_tokens=_bounded(sum(u.output_tokens for u in reported)),
        cached_tokens=_bounded(sum(u.cached_tokens for u in reported)),
        cost=cost,
        currency=next(iter(currencies)) if cost is not None else "",
        reported=bool(reported),
    )


def usage_from_plain(obj: Any) -> Usage:
    """A usage saved as plain JSON (the registry), read tolerantly: a field that does not fit
    is dropped, never the session; anything but an object is no usage."""
    if not isinstance(obj, Mapping):
        return Usage()
    values: dict[str, Any] = {}
    for name in ("input_tokens", "output_tokens", "cached_tokens", "context_used", "context_size"):
        if (n := _count(obj.get(name))) is not None:
            values[name] = n
    currency = obj.get("currency")
    cost = _money(obj.get("cost"))
    if cost is not None and isinstance(currency, str) and _CURRENCY.fullmatch(currency):
        values.update(cost=cost, currency=currency, cost_mark=_money(obj.get("cost_mark")))
    if obj.get("reported") is True or any(v is not None and v != 0 for v in values.values()):
        values["reported"] = True
    return Usage(**values)


def _count(value: Any) -> int | None:
    """A token count, or None for anything that is not a plausible one."""
    if type(value) is int:
        return value if 0 <= value <= MAX_TOKENS else None
    if type(value) is float and math.isfinite(value) and 0 <= value <= MAX_TOKENS:
        return int(value)
    return None


def _money(value: Any) -> float | None:
    """An amount of money, or None for anything that is not a plausible one."""
    if type(value) in (int, float) and math.isfinite(value) and 0 <= value <= MAX_COST:
        return float(value)
    return None


def _bounded(count: int) -> int:
    return min(count, MAX_TOKENS)
