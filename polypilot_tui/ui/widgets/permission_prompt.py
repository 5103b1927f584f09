"""A pending permission request: what the agent wants, and one button per option."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import Button, Static
from textual.widgets.button import ButtonVariant

from polypilot_tui.domain.dataclass_on_use import dataclass
from polypilot_tui.domain.text import one_line
from polypilot_tui.domain.turn import PermissionPrompt as Prompt
from polypilot_tui.ui.formatting import safe_text

KIND_KEYS = {"allow_once": "y", "allow_always": "a", "reject_once": "n", "reject_always": "N"}
"""Keys for the usual option kinds (ACP / Copilot naming); each is a binding of the prompt."""
DETAIL_LINES = 6
AWAY_HINT = "ctrl+g to answer by key"
"""Said while the keyboard is elsewhere (the prompt editor): there y, a and n are text."""
HERE_HINT = "←/→ choose · Enter answers · Esc back to the prompt"


class OptionButton(Button):
    """A button that answers with one option id; its key is shown while the keys answer."""

    def __init__(self, option_id: str, label: str, kind: str, key: str) -> None:
        variant: ButtonVariant = (
            "success" if kind.startswith("allow") else "error" if kind.startswith("reject") else "default"
        )
        super().__init__(Content(label), variant=variant, compact=True, classes="permission-option")
        self.option_id = option_id
        self.kind = kind
        self.key = key
        self.text = label
        """The option's words, whole: the scope is often said at its end."""

    def show_key(self, shown: bool) -> None:
        """Label with its key (``Allow once [y]``) when ``shown``, else the words alone."""
        self.label = Content(self.text + (f" [{self.key}]" if shown and self.key else ""))
        self.refresh(layout=True)  # a longer label needs a wider button: its width was set for the words alone


class PermissionPrompt(Vertical):
    """Shown while the session on screen waits for the user's permission."""

    DEFAULT_CSS = """
    PermissionPrompt {
        height: auto;
        border: round $permission-warning;
        border-title-color: $permission-warning;
        border-subtitle-color: $text-muted;
        padding: 0 1;
        background: $surface;
    }
    PermissionPrompt .permission-title {
        text-style: bold;
    }
    PermissionPrompt .permission-detail {
        color: $text-muted;
    }
    PermissionPrompt .permission-options {
        height: auto;
    }
    PermissionPrompt .permission-options.-stacked {
        layout: vertical;
    }
    PermissionPrompt .permission-option {
        margin-right: 1;
    }
    PermissionPrompt .permission-options.-stacked .permission-option {
        width: 1fr;
        height: auto;
        text-wrap: wrap;
        text-align: left;
        content-align: left middle;
        padding: 0 1;
        margin-right: 0;
    }
    """

    BINDINGS = [
        Binding("y", "pick('allow_once')", "Allow once", id="permission.allow_once"),
        Binding("a", "pick('allow_always')", "Allow & remember", id="permission.allow_always"),
        Binding("n", "pick('reject')", "Reject", id="permission.reject"),
        Binding("N", "pick('reject_always')", "Reject always", id="permission.reject_always"),
        Binding("left", "app.focus_previous", show=False),
        Binding("right", "app.focus_next", show=False),
        Binding("escape", "leave", "Back to prompt", show=False),
    ]

    @dataclass
    class Answered(Message):
        """The user chose an option for a request of ``session_id``."""

        session_id: str | None
        request_id: str
        option_id: str

    class Leave(Message):
        """The user wants to go back to typing."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.prompt: Prompt | None = None
        self.session_id: str | None = None
        """The session whose request is shown."""
        self._by_key = False
        """The keyboard came here by ctrl+g (:meth:`focus_first`): the keys are shown. A click
        shows none, so no button grows under the pointer between its press and release."""
        self._title = Static("", classes="permission-title", markup=False)
        self._detail = Static("", classes="permission-detail", markup=False)
        self._options = Horizontal(classes="permission-options")
        self.display = False
        self.border_title = "Permission"
        self.border_subtitle = AWAY_HINT

    def compose(self) -> ComposeResult:
        yield self._title
        yield self._detail
        yield self._options

    @property
    def buttons(self) -> list[OptionButton]:
        return list(self._options.query(OptionButton))

    async def show(self, prompt: Prompt | None, session_id: str | None = None) -> None:
        """Show ``prompt`` of ``session_id`` (None hides the widget); rebuilds only for a new request."""
        self.display = prompt is not None
        if prompt == self.prompt and session_id == self.session_id:
            return
        self.prompt = prompt
        self.session_id = session_id
        await self._options.remove_children()
        if prompt is None:
            return
        self._title.update(f"Permission requested: {one_line(prompt.title, 200)}")
        detail = safe_text(prompt.detail).strip()
        lines = detail.split("\n")
        if len(lines) > DETAIL_LINES:
            detail = "\n".join(lines[:DETAIL_LINES]) + f"\n… {len(lines) - DETAIL_LINES} more lines"
        self._detail.update(detail)
        self._detail.display = bool(detail) and detail not in prompt.title
        options = prompt.options or (
            ("allow_once", "Allow once", "allow_once"),
            ("reject_once", "Reject", "reject_once"),
        )
        keyed: set[str] = set()
        buttons = []
        for oid, label, kind in options:  # a key picks the first option of its kind: only that one shows it
            key = KIND_KEYS.get(kind, "") if kind not in keyed else ""
            keyed.add(kind)
            buttons.append(OptionButton(oid, label, kind, key))
        await self._options.mount_all(buttons)
        self._show_keys(self._by_key and self.has_focus_within)
        self.refresh_bindings()  # the footer offers the keys of these options only

    def on_resize(self) -> None:
        self._fit_options()

    def on_descendant_focus(self) -> None:
        self._show_keys(self._by_key)

    def on_descendant_blur(self) -> None:
        self.call_after_refresh(self._after_blur)  # focus may move to a sibling

    def _after_blur(self) -> None:
        self._by_key = self._by_key and self.has_focus_within
        self._show_keys(self._by_key)

    def _show_keys(self, shown: bool) -> None:
        """Keys on the buttons only where they answer: with the keyboard here (after ctrl+g)."""
        for button in self.buttons:
            button.show_key(shown)
        self.border_subtitle = HERE_HINT if shown else AWAY_HINT
        self._fit_options()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A key is offered (and works) only for a kind of option this request has."""
        if action == "pick":
            return self._option_of(str(parameters[0])) is not None
        return True

    def _option_of(self, kind: str) -> OptionButton | None:
        """The first option of ``kind`` (``reject``: of any reject kind)."""
        for button in self.buttons:
            if button.kind == kind or (kind == "reject" and button.kind.startswith("reject")):
                return button
        return None

    def _fit_options(self) -> None:
        """Options side by side when they fit, one per line when they do not (never cut off)."""
        needed = sum(len(str(button.label)) + 3 for button in self.buttons)
        self._options.set_class(needed > max(1, self.content_size.width), "-stacked")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if isinstance(event.button, OptionButton) and self.prompt is not None:
            event.stop()
            self.post_message(self.Answered(self.session_id, self.prompt.request_id, event.button.option_id))

    def action_pick(self, kind: str) -> None:
        """Answer with the first option of ``kind`` (``reject`` matches any reject kind)."""
        button = self._option_of(kind)
        if self.prompt is not None and button is not None:
            self.post_message(self.Answered(self.session_id, self.prompt.request_id, button.option_id))

    def action_leave(self) -> None:
        self.post_message(self.Leave())

    def focus_first(self) -> None:
        """Put the keyboard on the first option, at once.

        ``Widget.focus()`` moves the focus only after the messages already queued, so the
        "y" of a quick ctrl+g, y landed in the prompt editor; setting it on the screen now
        makes the very next key an answer.
        """
        buttons = self.buttons
        if buttons:
            self._by_key = True
            self.screen.set_focus(buttons[0])
            self._show_keys(True)
