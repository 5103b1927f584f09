"""Textual's footer, rebuilt only when the keys it shows change.

Textual's Footer recomposes (every key a new widget, each styled) on each bindings signal: a
focus change, each ``refresh_bindings``. A start sends four, the same keys each time, and they
were the frame that lists restored sessions waiting (~15-40 ms each with 200 sessions); moving
between two idle sessions sent one more. Here a signal whose keys are the ones on screen costs
a comparison.
"""

from __future__ import annotations

from collections.abc import Hashable

from textual.app import ComposeResult
from textual.widgets import Footer


class KeyFooter(Footer):
    """The keys that apply now, recomposed only when they differ from the ones shown."""

    def __init__(self) -> None:
        super().__init__()
        self._keys_drawn: Hashable = None

    def _keys_now(self) -> Hashable:
        """What a compose draws: each shown binding (key as displayed, label, action, enabled,
        tooltip, group)."""
        return (
            self.show_command_palette,
            tuple(
                (
                    binding.key,
                    self.app.get_key_display(binding),
                    binding.description,
                    binding.action,
                    enabled,
                    tooltip,
                    binding.tooltip,
                    binding.group,
                )
                for _node, binding, enabled, tooltip in self.screen.active_bindings.values()
                if binding.show
            ),
        )

    def compose(self) -> ComposeResult:
        drawn = 0
        for widget in super().compose():  # lazily: its ``with`` groups wrap the keys yielded inside
            drawn += 1
            yield widget
        self._keys_drawn = self._keys_now() if drawn else None  # nothing drawn: bindings not ready yet

    async def recompose(self) -> None:
        if not self.is_attached:  # its screen went away while the recompose waited: nothing to draw
            return
        if self._keys_drawn is not None and self._keys_now() == self._keys_drawn:
            return
        await super().recompose()
