"""Engine fixtures: a SessionManager on the demo agent in virtual time."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.config import Settings, load_agents
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.engine.manager import SessionManager
from tests.support.engine import Harness


@pytest.fixture
def make_harness(tmp_path: Path) -> Callable[..., Harness]:
    counter = itertools.count(1)

    def build(**overrides: Any) -> Harness:
        clock = FakeClock()
        settings = Settings(_env_file=None, state_dir=tmp_path, **overrides)  # type: ignore[call-arg]
        manager = SessionManager(settings, load_agents(None), clock, id_factory=lambda: f"s{next(counter)}")
        return Harness(manager, clock)

    return build


@pytest.fixture
def harness(make_harness: Callable[..., Harness]) -> Harness:
    return make_harness()
