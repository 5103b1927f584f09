"""Whether a text can be a model server's address: an http(s) URL with a host."""

from __future__ import annotations

from urllib.parse import urlsplit


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a model server's address (an http or https URL with a host), or None."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        return f"{url!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        said = f"its scheme is {parts.scheme!r}" if parts.scheme else "it has no scheme"
        return f"{url!r} is not an http:// or https:// URL ({said})"
    if not parts.hostname:
        return f"{url!r} names no host"
    return None
