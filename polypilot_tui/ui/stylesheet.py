"""The app's stylesheet: Textual's, with a reparse that keeps what it parsed, and parses from
tokens kept from the last start.

Textual's ``Stylesheet.reparse`` parses every source into a fresh stylesheet and keeps only the
rules, not that stylesheet's parse cache; the cache of the app's own is empty by then (new
variables clear it, and a theme set at start is new variables). The next ``parse`` — the first
widget of a kind not seen before, mounted a moment later — parses every source again. At the
dashboard's start that was every rule parsed twice (~10 ms of its first frame), and again on
each screen opened with style sheets of its own.

``parse`` alone does what ``reparse`` is for: it parses each source with the current
variables (from the cache when it has it) and replaces the rules only when all parsed, so a
source with an error leaves the stylesheet as it was. A copy (Textual's live CSS editing
swaps one in) is one of these too.

A source is parsed from its tokens as kept by :class:`~polypilot_tui.ui.css_tokens.KeptTokens`
(tokenizing was most of the parse), with Textual's own steps after its tokenizer (variables put
in, then rule sets: ``textual.css.parse.parse`` from its second line); a source whose kept
tokens do not parse cleanly is tokenized again.
"""

from __future__ import annotations

from collections.abc import Iterator

from textual.css.errors import StylesheetError
from textual.css.model import RuleSet
from textual.css.parse import parse_rule_set, substitute_references
from textual.css.stylesheet import Stylesheet
from textual.css.tokenizer import Token, TokenError
from textual.css.types import CSSLocation

from polypilot_tui.ui.css_tokens import KeptTokens


class AppStylesheet(Stylesheet):
    """A stylesheet whose reparse fills its own parse cache, parsing from kept tokens."""

    def __init__(self, *, variables: dict[str, str] | None = None, tokens: KeptTokens | None = None) -> None:
        super().__init__(variables=variables)
        self.tokens = tokens or KeptTokens()
        """Where sources' tokens come from: kept from the last start, or made now."""

    def reparse(self) -> None:
        self.parse()

    def copy(self) -> Stylesheet:
        copied = super().copy()  # Textual's copies its sources and variables into a plain one
        copied.__class__ = AppStylesheet  # the same state: only reparse and the tokens differ
        copied.tokens = self.tokens  # type: ignore[attr-defined]
        return copied

    def _parse_rules(
        self,
        css: str,
        read_from: CSSLocation,
        is_default_rules: bool = False,
        tie_breaker: int = 0,
        scope: str = "",
    ) -> list[RuleSet]:
        cache_key = (css, read_from, is_default_rules, tie_breaker, scope)
        cached = self._parse_cache.get(cache_key)
        if cached is not None:
            return cached
        try:
            tokens = self.tokens.tokens(css, read_from)
            rules = rule_sets(tokens, self._variable_tokens, scope, is_default_rules, tie_breaker)
            if any(rule.errors for rule in rules):
                raise ValueError("kept tokens with errors")
        except Exception:  # noqa: BLE001 - kept tokens that do not parse cleanly: tokenized again
            try:
                fresh = self.tokens.tokens(css, read_from, fresh=True)
                rules = rule_sets(fresh, self._variable_tokens, scope, is_default_rules, tie_breaker)
            except TokenError:
                raise
            except Exception as error:  # noqa: BLE001 - said as Textual says it
                raise StylesheetError(f"failed to parse css; {error}") from None
        self._parse_cache[cache_key] = rules
        return rules


def rule_sets(
    tokens: list[Token],
    variable_tokens: dict[str, list[Token]],
    scope: str,
    is_default_rules: bool,
    tie_breaker: int,
) -> list[RuleSet]:
    """What Textual's parse makes of a source after its tokenizer: the variables' tokens put in,
    then the rule sets."""
    stream: Iterator[Token] = iter(substitute_references(tokens, variable_tokens))
    rules: list[RuleSet] = []
    for token in stream:  # parse_rule_set reads on from the same stream
        if token.name.startswith("selector_start"):
            rules.extend(
                parse_rule_set(scope, stream, token, is_default_rules=is_default_rules, tie_breaker=tie_breaker)
            )
    return rules
