"""Shared fixtures: deterministic settings, a virtual clock, no cursor blink, and no error
that goes unseen.

A test fails when polypilot (a ``polypilot_tui`` logger, or asyncio reporting an exception
raised in polypilot's code) logs at ERROR or above while it runs, in the test process or in
the log of an engine it started through ``tests/support/engine_service.running_engine`` —
unless the test declares the error::

    @pytest.mark.expect_errors(r"change listener failed", r"RuntimeError: boom")

Each pattern is searched (``re.search``) in ``"<logger>: <message>"`` plus, when the record
carries an exception, ``"\n<Type>: <text>"``; each must match an error the test logged (a
stale declaration fails too, once the test itself passed). ``strict=False`` only allows the
errors (one that happens on some runs only), and then says why in ``reason=``.

NO_COLOR is removed at import time: every Textual App reads it in ``__init__``, and a
developer shell with ``NO_COLOR=1`` would otherwise change every snapshot.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

os.environ.pop("NO_COLOR", None)
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
# Real agents from npm go into the checkout's ignored .cache/npm (kept between runs of a clone).
os.environ.setdefault("POLYPILOT_NPM_CACHE", str(Path(__file__).resolve().parents[1] / ".cache" / "npm"))

import pytest
from textual.widgets import Input, TextArea

from polypilot_tui.config import Settings
from polypilot_tui.domain.clock import FakeClock
from tests.support.logged_errors import WATCHED_LOGGERS, LoggedErrors, collecting

#: The chaos matrix table (rows travel in test reports, so this must load on the xdist controller).
pytest_plugins = ["tests.chaos.matrix"]

_CALL_PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(trylast=True)  # after tests/e2e/conftest.py has marked its tests e2e
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long tests (real agents, ``slow``) first, the rest in collection order: xdist hands
    tests out in this order, so a long one collected last would run while the other worker
    has nothing left to do."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is None and item.get_closest_marker("slow") is None)


#: How many unexpected errors a failure shows in full (the rest are counted).
_SHOWN = 5


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call":
        item.stash[_CALL_PASSED] = report.passed


@pytest.fixture(autouse=True)
def no_unexpected_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test when polypilot logged an error it did not declare (module docstring).

    First of the autouse fixtures, so it sees the errors of every other fixture's teardown."""
    markers = list(request.node.iter_markers("expect_errors"))
    patterns = [p for marker in markers for p in marker.args]
    required = [p for marker in markers if marker.kwargs.get("strict", True) for p in marker.args]
    collector = LoggedErrors()
    loggers = [logging.getLogger(name) for name in WATCHED_LOGGERS]
    for logger in loggers:
        logger.addHandler(collector)
    collecting(collector)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(collector)
        collecting(None)
    errors = collector.errors
    unexpected = [e for e in errors if not any(e.matches(p) for p in patterns)]
    if unexpected:
        shown = "\n\n".join(f"[{e.where}] {e.text}\n{e.details}".rstrip() for e in unexpected[:_SHOWN])
        more = f"\n\n… and {len(unexpected) - _SHOWN} more" if len(unexpected) > _SHOWN else ""
        pytest.fail(
            f"polypilot logged {len(unexpected)} error(s) this test does not expect"
            f" (declare one with @pytest.mark.expect_errors(pattern)):\n\n{shown}{more}",
            pytrace=False,
        )
    unmatched = [p for p in required if not any(e.matches(p) for e in errors)]
    if unmatched and request.node.stash.get(_CALL_PASSED, False):
        pytest.fail(f"expected errors never logged: {unmatched}", pytrace=False)


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
    return Settings.read(None, state_dir=tmp_path)


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
