"""Optional key remapping from ``<user config dir>/polypilot/keymap.toml``.

Each line maps a binding id to keys, e.g. ``stop = "f12"`` or ``"sidebar.stop" = "S"``;
the ids are the ``id=`` of the app's bindings (see ``PolypilotApp.BINDINGS``).
"""

from __future__ import annotations

from pathlib import Path

import platformdirs

from polypilot_tui.config import APP_NAME
from polypilot_tui.domain.safe_json import ParseError, load_toml


def keymap_path() -> Path:
    """Where the user's keymap lives."""
    return Path(platformdirs.user_config_dir(APP_NAME)) / "keymap.toml"


def load_keymap(path: Path) -> tuple[dict[str, str], str | None]:
    """The keymap in ``path`` (empty when absent) and a problem description, if any."""
    if not path.exists():
        return {}, None
    try:
        raw = load_toml(path.read_text(encoding="utf-8"), str(path))  # bounded: a hostile file is an error
    except (OSError, UnicodeDecodeError) as exc:
        return {}, f"{path}: {exc}"
    except ParseError as exc:
        return {}, str(exc)
    keymap = {str(k): v for k, v in raw.items() if isinstance(v, str) and v.strip()}
    bad = sorted(str(k) for k, v in raw.items() if not (isinstance(v, str) and v.strip()))
    return keymap, (f"{path}: ignored entries without a key string: {', '.join(bad)}" if bad else None)
