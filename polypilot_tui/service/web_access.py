"""Who may open ``polypilot web``'s websocket: the printed token, then one page key per page load.

The token is long-lived (the server's life) and travels only from the printed address to the
page's own script, and from that script in an ``Authorization`` header to the page-key route.
A page key is what the websocket's address carries: random, good once, for a few seconds, and
never in a cookie, a URL the browser keeps, or anything sent to another port.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Final

from polypilot_tui.domain.clock import Clock

PAGE_KEY_SECONDS: Final = 30.0
"""How long a page key stays good: the page asks for it once loaded and opens the websocket at once."""
MOST_PAGE_KEYS: Final = 64
"""Keys waiting to be used at most (the oldest goes first): a bound, whoever asks."""
BEARER = "Bearer "


def new_secret() -> str:
    """A fresh random secret (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def shows_token(authorization: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header is ``Bearer <token>`` (compared in constant time)."""
    if authorization is None or not authorization.startswith(BEARER):
        return False
    shown = authorization[len(BEARER) :].encode("utf-8", "replace")
    return hmac.compare_digest(shown, token.encode("utf-8"))


class PageKeys:
    """Single-use websocket keys, each good for ``lifetime`` seconds of ``clock`` after it is made."""

    def __init__(self, clock: Clock, lifetime: float = PAGE_KEY_SECONDS, most: int = MOST_PAGE_KEYS) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.most = most
        self._deadlines: dict[str, float] = {}  # oldest first

    def __len__(self) -> int:
        return len(self._deadlines)

    def mint(self) -> str:
        """A new key; the expired ones, and the oldest beyond ``most``, are forgotten."""
        now = self.clock.now()
        for key in [key for key, deadline in self._deadlines.items() if deadline < now]:
            del self._deadlines[key]
        while len(self._deadlines) >= self.most:
            del self._deadlines[next(iter(self._deadlines))]
        key = new_secret()
        self._deadlines[key] = now + self.lifetime
        return key

    def redeem(self, key: str) -> bool:
        """Whether ``key`` is one of ours, unused and unexpired; it is spent either way."""
        deadline = self._deadlines.pop(key, None)
        return deadline is not None and self.clock.now() <= deadline
