"""Every dashboard of these tests is made attached to a served engine and in process."""

from __future__ import annotations

import pytest

from tests.ui.helpers import both_engine_shapes, engine_shape

__all__ = ["engine_shape"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    both_engine_shapes(metafunc)
