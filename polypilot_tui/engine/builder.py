"""The one way an engine is made: the dashboard's ``--in-process`` launch, ``polypilot serve``,
``run``, ``replay`` and every test rig call :func:`build_engine` (the rigs with their fakes)."""

from __future__ import annotations

from collections.abc import Callable

from polypilot_tui.config import AgentCatalog, Settings
from polypilot_tui.domain.clock import Clock, SystemClock
from polypilot_tui.engine.connector import BackendFactory
from polypilot_tui.engine.local import LocalEngine
from polypilot_tui.engine.manager import SessionManager


def build_engine(
    settings: Settings,
    catalog: AgentCatalog,
    clock: Clock | None = None,
    *,
    persist: bool = True,
    must_persist: bool = False,
    counts: bool = True,
    backend_factory: BackendFactory | None = None,
    id_factory: Callable[[], str] | None = None,
) -> LocalEngine:
    """A LocalEngine on ``clock`` (real time by default) for the agents of ``catalog``.

    ``persist``: its start restores the state folder's sessions and keeps them saved (else
    nothing is read or written there); ``must_persist``: a restore that fails stops the start
    (the engine service) instead of running unsaved; ``counts``: each session's changes are
    counted as it appears and after each turn (else only when asked: ``run`` shows none).
    ``backend_factory`` and ``id_factory`` replace the agents' backends and the session ids
    (replay, tests).
    """
    attach = None
    if persist:  # imported here: an attached dashboard or ``run`` saves nothing and need not load it
        from polypilot_tui.engine.persistence import attach_persistence

        attach = attach_persistence
    manager = SessionManager(
        settings, catalog, clock or SystemClock(), backend_factory=backend_factory, id_factory=id_factory
    )
    return LocalEngine(manager, attach, must_persist=must_persist, counts=counts)
