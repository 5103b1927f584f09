"""What the engine offers to start sessions with: each agent and whether it can start here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.names import close_names, either
from polypilot_tui.domain.sandbox import SandboxMode


class Availability(StrEnum):
    """Whether an agent can start on the engine's machine, in a word."""

    READY = "ready"
    NOT_INSTALLED = "not installed"
    """Its command is not found."""
    NOT_EXECUTABLE = "not executable"
    """A file of its command's name is there, but cannot be run (not executable, or a folder)."""
    MISCONFIGURED = "misconfigured"
    """Its settings cannot work (a model server address that is not an http(s) URL)."""
    NO_KEY = "no key"
    """The variable its provider's ``api_key_env`` names is not set."""
    NEEDS_SIGN_IN = "needs sign-in"
    """No sign of a sign-in was found (a guess: it may still start, and then say why not)."""

    @property
    def startable(self) -> bool:
        """Worth starting: ready, or maybe signed in in a way polypilot cannot see."""
        return self in (Availability.READY, Availability.NEEDS_SIGN_IN)


@dataclass(frozen=True)
class AgentOffer:
    """One agent as the engine offers it: what it is, where, and what it needs when not ready."""

    name: str
    kind: str
    availability: Availability
    title: str = ""
    where: str = ""
    """Its command's path ("built in" for the demo), or what is not found."""
    problem: str | None = None
    """Why it is not ready, in words (None when ready)."""
    hint: str = ""
    """The command that fixes it: the install command, or how to sign in."""
    sandbox: SandboxMode = SandboxMode.OFF
    """The sandbox its sessions get unless one is chosen (its agents-file entry's)."""

    @property
    def ready(self) -> bool:
        return self.availability is Availability.READY

    @property
    def cannot_start(self) -> str | None:
        """Why starting it would fail for sure (not installed, key not set), or None."""
        return None if self.availability.startable else self.problem


def why_missing(name: str, agents: Sequence[str], skipped: Mapping[str, str]) -> str:
    """Why there is no agent ``name``: its entry was skipped (``skipped``: where, and why), or
    the names it may be a typo of (and why those are skipped, if they are), else the agents."""
    if name in skipped:
        return f"agent {name!r} was skipped because of an error at {skipped[name]}"
    close = close_names(name, [*agents, *skipped])
    if not close:
        return f"no agent named {name!r} (agents: {', '.join(agents)})"
    why = [f"({n!r} was skipped because of an error at {skipped[n]})" for n in close if n in skipped]
    return " ".join([f"no agent named {name!r}; did you mean {either(close)}?", *why])
