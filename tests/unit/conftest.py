"""Engine fixtures: an engine on the demo agent in virtual time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.config import Settings
from tests.support.engine import Harness, demo_harness


@pytest.fixture
def make_harness(tmp_path: Path) -> Callable[..., Harness]:
    def build(**overrides: Any) -> Harness:
        return demo_harness(Settings.read(None, state_dir=tmp_path, **overrides))

    return build


@pytest.fixture
def harness(make_harness: Callable[..., Harness]) -> Harness:
    return make_harness()
