"""The engine's client over its Unix socket: what making one costs."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from polypilot_tui.service.client import EngineClient


async def test_a_client_loads_no_certificate_authorities(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The socket speaks plain HTTP: making a client (the dashboard's attach, every command) loads
    no CA bundle (httpx's default context did, 20-100 ms of CPU each)."""
    loaded: list[dict[str, Any]] = []
    real = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        loaded.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    client = EngineClient(tmp_path / "engine.sock")
    await client.aclose()
    assert loaded == []
    httpx.AsyncHTTPTransport(uds=str(tmp_path / "engine.sock"))  # the count can fail: httpx's default loads them
    assert len(loaded) == 1
