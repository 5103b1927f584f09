"""The app's stylesheet: Textual's, with a reparse that keeps what it parsed.

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
"""

from __future__ import annotations

from textual.css.stylesheet import Stylesheet


class AppStylesheet(Stylesheet):
    """A stylesheet whose reparse fills its own parse cache."""

    def reparse(self) -> None:
        self.parse()

    def copy(self) -> Stylesheet:
        copied = super().copy()  # Textual's copies its sources and variables into a plain one
        copied.__class__ = AppStylesheet  # the same state: only reparse differs
        return copied
