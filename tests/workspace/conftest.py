"""Every git call of these tests, ours and the app's, commits as one test identity."""

from __future__ import annotations

import pytest

from tests.workspace.repos import IDENTITY


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
