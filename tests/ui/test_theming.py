"""Theme files: the bundled ones load; a bad file is reported, never raised."""

from __future__ import annotations

from pathlib import Path

from polypilot_tui.ui.theming import APP_VARIABLES, BUNDLED_DIR, load_theme_file, load_themes


def test_bundled_themes_load_with_every_app_variable() -> None:
    loaded = load_themes(BUNDLED_DIR)
    assert not loaded.failures
    by_name = {t.name: t for t in loaded.themes}
    assert {"polypilot-night", "polypilot-day"} <= set(by_name)
    assert by_name["polypilot-night"].dark and not by_name["polypilot-day"].dark
    for theme in by_name.values():
        assert set(APP_VARIABLES) <= set(theme.variables)


def test_bad_files_are_reported_with_path_and_reason(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text("primary = 'nope'\n", encoding="utf-8")
    (tmp_path / "b.toml").write_text("primary = '#fff'\nsparkle = true\n", encoding="utf-8")
    (tmp_path / "c.toml").write_text("[[broken", encoding="utf-8")
    (tmp_path / "d.toml").write_text("dark = true\n", encoding="utf-8")
    (tmp_path / "e.toml").write_text("primary = '#fff'\n[variables]\npermission-warning = 3\n", encoding="utf-8")
    (tmp_path / "ok.toml").write_text("primary = '#336699'\n", encoding="utf-8")
    loaded = load_themes(tmp_path, tmp_path / "missing")
    assert [t.name for t in loaded.themes] == ["ok"]  # the name defaults to the file name
    reasons = "\n".join(loaded.failures)
    assert len(loaded.failures) == 5
    for fragment in (
        "a.toml: primary = 'nope' is not a colour",
        "unknown key 'sparkle'",
        "not valid TOML",
        "'primary' colour is required",
        "variables.permission-warning must be a colour",
    ):
        assert fragment in reasons


def test_theme_file_fields(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_text(
        "name = 'mine'\nprimary = 'red'\ndark = false\n[variables]\nstatus-busy = '#00ff00'\n", encoding="utf-8"
    )
    theme = load_theme_file(path)
    assert (theme.name, theme.primary, theme.dark, theme.variables) == (
        "mine",
        "red",
        False,
        {"status-busy": "#00ff00"},
    )
