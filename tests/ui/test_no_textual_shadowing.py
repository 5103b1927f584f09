"""Our widgets and app never reuse a name Textual uses for its own internals.

Three such clashes broke the dashboard: ``App._flush`` (every print inside the app raised
TypeError), ``TextArea.history`` (the prompt box crashed on the first key) and
``MessagePump._closed`` (a list there made the app believe it had shut down). This test
reads every class under ``polypilot_tui/ui`` that derives from a Textual class and checks
each method it defines and each ``self.<name>`` it assigns against the Textual bases.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import textwrap
from pathlib import Path

import textual
from textual.app import App
from textual.message_pump import MessagePump

import polypilot_tui.ui as ui_package

UI_ROOT = Path(ui_package.__file__).parent

#: Hooks Textual means subclasses to override.
INTENDED = {
    "compose",
    "on_mount",
    "on_unmount",
    "on_key",
    "on_show",
    "render",
    "render_line",
    "render_lines",  # the diff view finishes its rows on screen itself (diff_lines.py; a test compares Textual's)
    "get_theme_variable_defaults",
    "check_action",
    "get_system_commands",
    "get_default_screen",
    "exit",
    "notify_style_update",
    "validate_index",
    "watch_index",
    "watch__hover",
    "action_quit",
    "action_help_quit",
    "action_cursor_up",
    "action_cursor_down",
    "action_cursor_page_up",
    "action_cursor_page_down",
    "_on_key",
    "_on_click",
    "_on_mouse_move",
    "_on_leave",
    "_on_resize",
    "_on_paste",
    "can_replace",
    "control",
    "action_select",
    "action_first",
    "action_last",
    "action_page_up",
    "action_page_down",
    "action_cancel",
    "action_close",
    "action_leave",
    "on_button_pressed",
    "on_option_list_option_selected",
    "action_pick",
    "get_selection",
    "auto_links",  # Widget's selection and link API, meant to be overridden / set
    "recompose",  # the footer skips a recompose that would draw the same keys (key_footer.py)
    "get_content_width",  # a widget's size from what it draws (the footer's keys)
    "get_content_height",
    "stylesheet",  # the app's, whose reparse keeps what it parsed (ui/stylesheet.py)
}


@functools.cache
def _own_names(base: type) -> frozenset[str]:
    """What one Textual class defines, and assigns on ``self`` in its source."""
    names = set(vars(base))
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(base)))
    except (OSError, TypeError):
        return frozenset(names)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
    return frozenset(names)


def textual_names(cls: type) -> set[str]:
    """Names Textual classes in ``cls``'s MRO define or assign on ``self``."""
    names: set[str] = set()
    for base in cls.__mro__:
        module = inspect.getmodule(base)
        if module is not None and module.__name__.startswith("textual"):
            names |= _own_names(base)
    return names


def our_classes() -> list[tuple[type, set[str]]]:
    """(class, names it defines or assigns on self) for every Textual-derived class in ui/."""
    found: list[tuple[type, set[str]]] = []
    for path in sorted(UI_ROOT.rglob("*.py")):
        module_name = "polypilot_tui." + ".".join(path.relative_to(UI_ROOT.parent).with_suffix("").parts)
        module = importlib.import_module(module_name)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            cls = getattr(module, node.name, None)
            if cls is None:
                continue
            names = {item.name for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.ctx, ast.Store)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    names.add(sub.attr)
            found.append((cls, names))
    return found


def app_classes() -> list[type]:
    from polypilot_tui.ui.app import PolypilotApp

    return [PolypilotApp]


def test_no_ui_class_reuses_a_textual_internal_name() -> None:
    clashes: list[str] = []
    for cls, names in our_classes():
        if issubclass(cls, MessagePump):
            target = cls
        elif any(cls in app_class.__mro__ for app_class in app_classes()):
            target = App  # a mixin of the app: against App
        else:
            continue  # a plain helper class: nothing of Textual to shadow
        base_names = textual_names(target)
        for name in sorted(names & base_names):
            if name in INTENDED or (name.startswith("__") and name.endswith("__")):
                continue
            if name.isupper() or name in ("DEFAULT_CSS", "BINDINGS", "COMPONENT_CLASSES", "CSS_PATH", "TITLE"):
                continue
            # Public attributes Textual documents for users to set (e.g. placeholder, display).
            if not name.startswith("_") and name in {
                "placeholder",
                "display",
                "border_title",
                "border_subtitle",
                "sub_title",
                "theme",
                "label",
                "index",
                "tooltip",
                "virtual_size",
            }:
                continue
            clashes.append(f"{cls.__module__}.{cls.__qualname__}.{name}")
    assert not clashes, f"names that shadow Textual internals (textual {textual.__version__}): {clashes}"


def test_the_check_sees_a_clash() -> None:
    """The check itself works: the three clashes that broke the app are found."""
    from textual.widgets import TextArea

    assert "history" in textual_names(TextArea)
    assert "_closed" in textual_names(App)
    assert "_flush" in textual_names(App)
