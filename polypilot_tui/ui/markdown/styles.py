"""Styles of drawn markdown, as strings with theme variables resolved when drawn.

Strings, so a theme change applies on the next draw; only variables that are colours
("auto" ones such as ``$text-muted`` do not resolve in a style string). Not component
classes: Textual styles each of those per widget when it mounts, which made opening a
long session markedly slower.
"""

from __future__ import annotations

HEADING_STYLES = {"h1": "bold underline $text-primary", "h2": "bold $text-primary"}
"""Heading level -> style (h3 and deeper share :data:`HEADING_STYLE`)."""
HEADING_STYLE = "bold"
BULLET_STYLE = "$text-primary"
QUOTE_STYLE = "$foreground-muted"
CODE_STYLE = "$text-warning on $warning 10%"
LINK_STYLE = "underline $text-accent"
URL_STYLE = "$foreground-muted"
TABLE_BORDER = "$foreground 35%"
TABLE_HEADER = "bold"
