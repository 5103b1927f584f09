"""Themes from TOML files: the bundled ones plus the user's themes folder.

A theme file holds Textual's ``Theme`` fields at the top level and app variables under
``[variables]``. A file that cannot be used is reported (path and reason) and skipped; it
never stops the app. Bundled themes live in ``polypilot_tui/themes`` (package data); user
themes in ``<user config dir>/polypilot/themes`` override bundled ones of the same name.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Any

import platformdirs
from textual.app import App
from textual.color import Color, ColorParseError
from textual.notifications import SeverityLevel
from textual.theme import Theme

from polypilot_tui.config import APP_NAME
from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.safe_json import ParseError, load_toml

BUNDLED_DIR = Path(__file__).resolve().parent.parent / "themes"
"""Themes shipped with the package."""

DEFAULT_THEME = "polypilot-night"

APP_VARIABLES: dict[str, str] = {
    "permission-warning": "#f2b94b",
    "status-busy": "#5fa8d3",
    "status-attention": "#ef6b73",
    "status-idle": "#888888",
    "status-unread": "#c792ea",
    "chat-user-background": "#7f7f7f 15%",
}
"""The app's own CSS variables and their fallbacks (used under built-in Textual themes)."""

_COLOR_FIELDS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
_OTHER_FIELDS = {"name": str, "dark": bool, "luminosity_spread": (int, float), "text_alpha": (int, float)}


class ThemeFileError(Exception):
    """A theme file cannot be used; the message names the file and the reason."""


@dataclass
class ThemeLoad:
    """Themes that loaded, and one line per file that did not."""

    themes: list[Theme] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def user_themes_dir() -> Path:
    """Where a user drops extra ``*.toml`` themes."""
    return Path(platformdirs.user_config_dir(APP_NAME)) / "themes"


def _color(path: Path, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ThemeFileError(f"{path}: {key} must be a colour string, got {type(value).__name__}")
    try:
        Color.parse(value)
    except ColorParseError:
        raise ThemeFileError(f"{path}: {key} = {value!r} is not a colour") from None
    return value


def load_theme_file(path: Path) -> Theme:
    """Parse one theme file; raises :class:`ThemeFileError` with a clear reason."""
    try:
        raw = load_toml(path.read_text(encoding="utf-8"), str(path))  # bounded depth: a hostile file is an error
    except (OSError, UnicodeDecodeError) as exc:
        raise ThemeFileError(f"{path}: cannot be read ({exc})") from None
    except ParseError as exc:
        raise ThemeFileError(str(exc)) from None
    kwargs: dict[str, Any] = {"name": path.stem}
    variables: dict[str, str] = {}
    for key, value in raw.items():
        if key == "variables":
            if not isinstance(value, dict):
                raise ThemeFileError(f"{path}: [variables] must be a table")
            variables = {str(k): _color(path, f"variables.{k}", v) for k, v in value.items()}
        elif key in _COLOR_FIELDS:
            kwargs[key] = _color(path, key, value)
        elif key in _OTHER_FIELDS:
            if not isinstance(value, _OTHER_FIELDS[key]):  # type: ignore[arg-type]
                raise ThemeFileError(f"{path}: {key} has the wrong type ({type(value).__name__})")
            kwargs[key] = value
        else:
            raise ThemeFileError(f"{path}: unknown key {key!r}")
    if "primary" not in kwargs:
        raise ThemeFileError(f"{path}: 'primary' colour is required")
    if not isinstance(kwargs["name"], str) or not kwargs["name"].strip():
        raise ThemeFileError(f"{path}: name must be a non-empty string")
    return Theme(variables=variables, **kwargs)


def load_themes(*folders: Path) -> ThemeLoad:
    """Load every ``*.toml`` in ``folders`` (missing folders are fine), in order."""
    result = ThemeLoad()
    for folder in folders:
        try:
            paths = sorted(folder.glob("*.toml")) if folder.is_dir() else []
        except OSError as exc:
            result.failures.append(f"{folder}: cannot be listed ({exc})")
            continue
        for path in paths:
            try:
                result.themes.append(load_theme_file(path))
            except ThemeFileError as exc:
                result.failures.append(str(exc))
    return result


def install_themes(app: App[Any], folders: list[Path], wanted: str) -> list[tuple[str, str, SeverityLevel]]:
    """Register the themes of ``folders`` with ``app`` and switch to ``wanted`` (else the
    default); returns what to tell the user as (message, title, severity)."""
    loaded = load_themes(*folders)
    for theme in loaded.themes:
        app.register_theme(theme)
    notes: list[tuple[str, str, SeverityLevel]] = []
    if loaded.failures:
        notes.append(("\n".join(loaded.failures), "Theme file skipped", "error"))
    if wanted in app.available_themes:
        app.theme = wanted
    else:
        notes.append((f"Theme {wanted!r} not found; using {DEFAULT_THEME!r}.", "Theme", "warning"))
        app.theme = DEFAULT_THEME if DEFAULT_THEME in app.available_themes else "textual-dark"
    return notes
