"""Inline markdown (one paragraph, heading or table cell) to Textual Content.

Emphasis becomes styles; a link shows its text and then its address, ``text (url)``, and
is never clickable; an image shows ``[image: alt] (src)``. Any other inline token shows its
text. Nothing becomes Rich or Textual markup: Content is built from plain strings and spans.
"""

from __future__ import annotations

from markdown_it.common.normalize_url import normalizeLinkText
from markdown_it.token import Token
from textual.content import Content, Span

from polypilot_tui.ui.markdown.styles import CODE_STYLE, LINK_STYLE, URL_STYLE

_OPEN_STYLES = {"em_open": "italic", "strong_open": "bold", "s_open": "strike", "link_open": LINK_STYLE}


def inline_content(token: Token) -> Content:
    """Inline markdown to Content: emphasis as styles, links as ``text (url)``, never markup."""
    parts: list[str] = []
    spans: list[Span] = []
    stack: list[tuple[int, str, str]] = []
    position = 0

    def add(text: str, style: str = "") -> None:
        nonlocal position
        if style and text:
            spans.append(Span(position, position + len(text), style))
        parts.append(text)
        position += len(text)

    for child in token.children or ():
        kind = child.type
        if kind == "text":
            add(child.content)
        elif kind in ("softbreak", "hardbreak"):
            add("\n")
        elif kind == "code_inline":
            add(child.content, CODE_STYLE)
        elif kind in _OPEN_STYLES:
            stack.append((position, _OPEN_STYLES[kind], _target(child)))
        elif kind.endswith("_close") and stack:
            start, style, target = stack.pop()
            spans.append(Span(start, position, style))
            label = "".join(parts)[start:]
            if target and target not in (label, f"mailto:{label}"):
                add(f" ({target})", URL_STYLE)
        elif kind == "image":
            alt = "".join(grandchild.content for grandchild in child.children or ()) or child.content
            add(f"[image: {alt}]", LINK_STYLE)
            add(f" ({_target(child, 'src')})", URL_STYLE)
        elif child.content:
            add(child.content)
    return Content("".join(parts), spans=spans)


def _target(token: Token, key: str = "href") -> str:
    """A link's address as written (not percent-encoded or punycoded), and its title if any."""
    target = normalizeLinkText(str(token.attrs.get(key, "")))
    title = token.attrs.get("title")
    return f'{target} "{title}"' if title else target
