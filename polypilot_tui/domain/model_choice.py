"""The models an agent offers a session, and which one it runs (the "Switch model…" picker).

Pure data: the backends fill it from what their agent says (ACP ``configOptions``, the
Copilot SDK's model list, the demo agent's fakes), the engine passes it on, the service
sends it as it is (:mod:`polypilot_tui.engine.codec`).
"""

from __future__ import annotations

from polypilot_tui.domain.dataclass_on_use import dataclass

MAX_OPTIONS = 500
"""More models than anyone picks from; the rest of a longer list is left out."""


@dataclass(frozen=True)
class ModelOption:
    """One model the agent offers: its id (what a switch names), a name and a line about it."""

    id: str
    name: str = ""
    description: str = ""


@dataclass(frozen=True)
class ModelChoices:
    """The models a session can switch to, and the one it runs now ("" when the agent does not say)."""

    current: str = ""
    options: tuple[ModelOption, ...] = ()
    note: str = ""
    """Why the list is short or empty, in words ("the agent offers no model choice")."""
    free_form: bool = False
    """The agent takes any model id, listed or not (Copilot with a BYOK provider)."""

    def __post_init__(self) -> None:
        # Agents' lists are untrusted: a repeated id (across groups, or after a cut) would be
        # two rows of one model, and the picker's list refuses duplicate ids.
        unique: dict[str, ModelOption] = {}
        for option in self.options[:MAX_OPTIONS]:
            unique.setdefault(option.id, option)
        object.__setattr__(self, "options", tuple(unique.values()))

    def offers(self, model_id: str) -> bool:
        """True when ``model_id`` is one of the options."""
        return any(option.id == model_id for option in self.options)
