"""Pilot helpers: build the app on the real demo agent, wait on conditions (never on sleeps).

Every rig makes its dashboard with :func:`on_engine`, in the test's engine shape: ``served``
(the default, as ``polypilot`` runs: the dashboard attached over the engine's socket to an
engine served in the test's loop) or ``local`` (``--in-process``), set by the ``engine_shape``
fixture (tests/ui conftest; a snapshot is taken served, or in the shape its case names); a
test reaches the engine behind the dashboard with :func:`engine_of`, never through ``app.engine``.

The served shape is the one users run; every dashboard test runs in it. The in-process shape
shares every widget and screen and differs only in the engine front, so it runs where a
module says ``IN_PROCESS_TOO = True`` (the walk through every key, tests/ui/test_pilot.py) and
in the tests marked ``in_process`` (what only it does): running the whole suite twice cost CI
two minutes for no path of its own."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from weakref import WeakKeyDictionary

import pytest
from textual import events
from textual.app import App
from textual.notifications import Notification
from textual.pilot import Pilot
from textual.widget import Widget

from polypilot_tui.config import AgentCatalog, Settings, load_agents
from polypilot_tui.domain.clock import SystemClock
from polypilot_tui.engine.api import Engine
from polypilot_tui.engine.local import Attach, LocalEngine
from polypilot_tui.engine.manager import SessionManager
from polypilot_tui.ui.app import PolypilotApp
from polypilot_tui.ui.launch import dashboard_on
from polypilot_tui.ui.theming import BUNDLED_DIR
from tests.support.engine_service import ServedEngine, caught_up
from tests.support.waiting import What, until

EngineShape = Literal["served", "local"]
ENGINE_SHAPES: tuple[EngineShape, ...] = ("served", "local")
_shape: list[EngineShape] = ["served"]
_engines: WeakKeyDictionary[App[Any], LocalEngine] = WeakKeyDictionary()


@pytest.fixture(autouse=True)
def engine_shape(request: pytest.FixtureRequest) -> Iterator[EngineShape]:
    """The shape every dashboard of the test is made in (see the module's docstring): served
    unless :func:`both_engine_shapes` parametrized it."""
    shape: EngineShape = getattr(request, "param", "served")
    with shaped(shape):
        yield shape


@contextmanager
def shaped(shape: EngineShape) -> Iterator[None]:
    """Dashboards made meanwhile are made in ``shape``."""
    _shape[0] = shape
    try:
        yield
    finally:
        _shape[0] = "served"


def both_engine_shapes(metafunc: pytest.Metafunc) -> None:
    """``pytest_generate_tests`` of a suite: a test marked ``in_process`` (what only a dashboard
    with the engine inside it does) runs local only; those of a module that says
    ``IN_PROCESS_TOO = True`` run in each shape; the rest served (the module docstring says why)."""
    if "engine_shape" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("in_process"):
        metafunc.parametrize("engine_shape", ["local"], indirect=True)
    elif getattr(metafunc.module, "IN_PROCESS_TOO", False):
        metafunc.parametrize("engine_shape", ENGINE_SHAPES, indirect=True)


def on_engine(settings: Settings, catalog: AgentCatalog, engine: LocalEngine, **options: Any) -> PolypilotApp:
    """The dashboard on ``engine`` in the test's shape: attached to it served, or in process."""
    front: Engine = ServedEngine(engine, start=True).attach() if _shape[0] == "served" else engine
    app = dashboard_on(settings, catalog, front, **options)
    _engines[app] = engine
    return app


def engine_of(app: App[Any]) -> LocalEngine:
    """The engine behind a dashboard made by :func:`on_engine` (served or in process)."""
    return _engines[app]


async def caught_up_with(pilot: Pilot[Any], timeout: float = 10.0) -> None:
    """Until the dashboard's engine holds what the engine behind it holds (at once in process;
    attached, when the stream has brought it)."""
    app = pilot.app
    engine = engine_of(app)
    if app.engine is not engine:
        await until(lambda: caught_up(app.engine, engine), timeout, "the dashboard's mirror", pause=pilot.pause)


async def session_added(pilot: Pilot[Any], agent: str, **options: Any) -> str:
    """A session added on the engine behind the dashboard (setup: a workspace the test made,
    a session that does not connect), once the dashboard shows it; its id."""
    sid = engine_of(pilot.app).manager.add_session(agent, **options)
    await caught_up_with(pilot)
    return sid


def demo_app(
    tmp_path: Path,
    *,
    speed: float = 20.0,
    theme_dirs: list[Path] | None = None,
    keymap_file: Path | None = None,
    attach: Attach | None = None,
    **overrides: Any,
) -> PolypilotApp:
    """The app on the embedded demo agent and the real clock, with ids s1, s2, …"""
    settings = Settings.read(
        None,
        state_dir=tmp_path,
        demo_speed=speed,
        record=False,
        **overrides,
    )
    catalog = load_agents(None)
    clock = SystemClock()
    ids = itertools.count(1)
    manager = SessionManager(settings, catalog, clock, id_factory=lambda: f"s{next(ids)}")
    return on_engine(
        settings,
        catalog,
        LocalEngine(manager, attach),
        theme_dirs=theme_dirs or [BUNDLED_DIR],
        keymap_file=keymap_file or tmp_path / "no-keymap.toml",
        launch_folder=str(tmp_path),  # not the checkout the tests run in
    )


async def wait_for(
    pilot: Pilot[Any], predicate: Callable[[], object], timeout: float = 10.0, what: What = "condition"
) -> None:
    """Poll app state (letting the app run between polls) until ``predicate()`` holds.

    Then the app is let finish what that started (a pushed screen composes and mounts), as a
    user's next key would find it: under load a poll can wake between the two.
    """
    await until(predicate, timeout, what, pause=pilot.pause)
    await pilot.pause()


# Textual has no public API for what a user sees of toasts, the composed screen, or keys
# arriving all at once; these helpers are the only places tests reach into its privates.
def toasts(app: App[Any]) -> list[Notification]:
    """The toasts currently shown."""
    return list(app._notifications)  # noqa: SLF001


def notifications(app: App[Any]) -> list[str]:
    """Titles and messages of the toasts currently shown."""
    return [f"{n.title}: {n.message}" for n in toasts(app)]


def keys_at_once(app: App[Any], *keys: str | events.Key) -> None:
    """Queue keys as a terminal delivers a burst: all before the app handles the first
    (a one-character name is typed text; longer names such as "ctrl+g" are keys)."""
    driver = app._driver  # noqa: SLF001
    assert driver is not None
    for key in keys:
        event = key if isinstance(key, events.Key) else events.Key(key, key if len(key) == 1 else None)
        event.set_sender(app)
        driver.send_message(event)


def terminal_writes(app: App[Any]) -> list[str]:
    """Everything the app writes to the terminal from now on (escape sequences included)."""
    written: list[str] = []
    driver = app._driver  # noqa: SLF001
    assert driver is not None
    write = driver.write
    driver.write = lambda data: (written.append(data), write(data))[1]  # type: ignore[method-assign]
    return written


def screen_text(app: App[Any]) -> str:
    """What the terminal shows right now, as plain text (one line per row)."""
    return "\n".join(line.rstrip() for line in screen_lines(app))


async def type_text(pilot: Pilot[Any], text: str) -> None:
    """Type ``text`` key by key (newlines as ctrl+j, the editor's new-line key)."""
    keys = ["ctrl+j" if ch == "\n" else "space" if ch == " " else ch for ch in text]
    await pilot.press(*keys)


def screen_lines(app: App[Any]) -> list[str]:
    """The text on screen now, one string per row (what the user sees, after composition)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]  # noqa: SLF001


def widget_lines(widget: Widget) -> list[str]:
    """The screen rows a widget covers, cropped to it (its visible part only)."""
    region = widget.region.intersection(widget.app.screen.region)
    strips = widget.app.screen._compositor.render_strips()  # noqa: SLF001
    return [strip.crop(region.x, region.right).text for strip in strips[region.y : region.bottom]]


def paste(app: App[Any], text: str) -> None:
    """Paste ``text`` as a terminal delivers it (bracketed paste: one event to the app)."""
    driver = app._driver  # noqa: SLF001
    assert driver is not None
    event = events.Paste(text)
    event.set_sender(app)
    driver.send_message(event)
