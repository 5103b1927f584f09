"""Shared fixtures: deterministic settings, a virtual clock, no cursor blink.

NO_COLOR is removed at import time: every Textual App reads it in ``__init__``, and a
developer shell with ``NO_COLOR=1`` would otherwise change every snapshot.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

os.environ.pop("NO_COLOR", None)
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
# Real agents from npm go into the checkout's ignored .cache/npm (kept between runs of a clone).
os.environ.setdefault("POLYPILOT_NPM_CACHE", str(Path(__file__).resolve().parents[1] / ".cache" / "npm"))

import pytest  # noqa: E402
from textual.widgets import Input, TextArea  # noqa: E402

from polypilot_tui.config import Settings  # noqa: E402
from polypilot_tui.domain.clock import FakeClock  # noqa: E402

#: The chaos matrix table (rows travel in test reports, so this must load on the xdist controller).
pytest_plugins = ["tests.chaos.matrix"]


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """A blinking cursor makes two screenshots of the same state differ (the prompt editor's
    blink timer fires on real time: on a loaded machine a snapshot caught it half-way)."""
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)
    monkeypatch.setattr(TextArea, "_toggle_cursor_blink_visible", lambda self: None)


@pytest.fixture(autouse=True)
def no_polypilot_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The developer's POLYPILOT_* variables never leak into a test."""
    for key in [k for k in os.environ if k.startswith("POLYPILOT_")]:
        monkeypatch.delenv(key)
    # Nor their config folder (config.toml, agents.toml): an empty one of the test's own.
    monkeypatch.setenv("POLYPILOT_CONFIG_DIR", str(tmp_path_factory.mktemp("config")))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Defaults, no ``.env``, state under the test's tmp_path."""
    return Settings(_env_file=None, state_dir=tmp_path)  # type: ignore[call-arg]


@pytest.fixture
def fake_clock() -> FakeClock:
    """Virtual time: nothing moves until the test advances it."""
    return FakeClock()


def _engines_under(folder: Path) -> list[int]:
    """Engine processes (``polypilot serve``) whose state folder lies under ``folder``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"polypilot_tui" not in b" ".join(argv) or b"serve" not in argv:
                continue
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        state = next((e.split(b"=", 1)[1] for e in environ if e.startswith(b"POLYPILOT_STATE_DIR=")), b"")
        if state and Path(os.fsdecode(state)).is_relative_to(folder):
            found.append(int(proc.name))
    return found


@pytest.fixture(autouse=True)
def no_engine_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A dashboard under test starts its engine detached, as ``polypilot`` does: the engine
    of a test's state folder is ended with the test (a leftover would hold CPU and memory)."""
    tmp_path: Path | None = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    for pid in _engines_under(tmp_path) if tmp_path is not None else ():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
