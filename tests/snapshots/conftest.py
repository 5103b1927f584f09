"""The snapshots are taken in process for now: attached, ten cases differ (issue 23, to do:
the mirror does not catch up with fake agents that never connect, the Driver reaches
``engine.changes``, and first-start/quit screens differ). Their files are named by the case."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ui.helpers import EngineShape, shaped


@pytest.fixture(autouse=True)
def engine_shape() -> Iterator[EngineShape]:
    with shaped("local"):
        yield "local"
