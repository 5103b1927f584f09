"""``polypilot web``'s access: loopback only, the token buys a page key, the page key opens the
websocket once, no cookie, and what every answer tells the browser.

Each test starts the real server (textual-serve's app behind the guard) on a socket bound by
``listen``, in virtual time (page keys expire on a FakeClock), and stops it. The websocket's
dashboard command is a shell command that exits at once, so no dashboard starts here
(tests/e2e/test_web_browser.py drives a real one in Chromium).
"""

from __future__ import annotations

import errno
import gc
import json
import re
import shlex
import socket
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import aiohttp
import pytest

from polypilot_tui.cli import main
from polypilot_tui.domain.clock import FakeClock
from polypilot_tui.service.web import (
    PAGE_SCRIPT_PATH,
    SAFE_HEADERS,
    NotLoopback,
    TokenServer,
    bind_address,
    dashboard_command,
    listen,
)
from polypilot_tui.service.web_access import PAGE_KEY_SECONDS, PageKeys, shows_token
from tests.support.waiting import until

# textual-serve never closes a dashboard's stdin pipe: the process's transport is closed when
# it is collected, which must happen while the loop runs (the server's loop always does; here
# the collection is forced before the test's loop ends, and should the shell not have exited
# yet, the late report is ignored for this module).
pytestmark = [
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore:unclosed transport:ResourceWarning"),
]

TOKEN = "the-right-token-" + "x" * 27
NO_DASHBOARD = "exit 0"  # textual-serve runs it with the shell: gone at once, nothing started
SIZE = "?width=80&height=24"


@pytest.fixture(autouse=True, scope="module")
def young_heap() -> Iterator[None]:
    """Each test's ``gc.collect()`` looks at what this module made, not at the whole heap the
    worker built before it (late in a run a full collection took seconds, every test): that
    heap is frozen for the module (``gc.freeze``) and given back to the collector after."""
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def server(clock: FakeClock) -> AsyncIterator[TokenServer]:
    web = TokenServer(NO_DASHBOARD, listen("127.0.0.1", 0), TOKEN, clock)
    await web.start()
    try:
        yield web
    finally:
        await web.stop()
        gc.collect()  # every connection's handler has ended: its process object goes now


async def get(url: str, **headers: str) -> tuple[int, str, Mapping[str, str]]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(url, headers=headers, allow_redirects=False) as response,
    ):
        return response.status, await response.text(), response.headers


async def post_key(server: TokenServer, url: str | None = None, **headers: str) -> tuple[int, str]:
    """``POST /key`` with ``headers`` (the page's Origin unless one is given)."""
    headers.setdefault("Origin", server.public_url)
    async with (
        aiohttp.ClientSession() as http,
        http.post(url or f"{server.public_url}/key", headers=headers, allow_redirects=False) as response,
    ):
        return response.status, await response.text()


async def page_key_url(server: TokenServer) -> str:
    """The websocket's address with a new page key, as the page's script gets it."""
    status, text = await post_key(server, Authorization=f"Bearer {TOKEN}")
    assert status == 200, text
    url = json.loads(text)["websocket"]
    assert isinstance(url, str)
    return url


async def websocket(url: str, **headers: str) -> int:
    """101 when the websocket opens (it is closed at once), else the handshake's status."""
    async with aiohttp.ClientSession() as http:
        try:
            ws = await http.ws_connect(url + SIZE, headers=headers)
        except aiohttp.WSServerHandshakeError as refused:
            return refused.status
        await ws.close()
        return 101


async def test_the_printed_address_holds_the_token_in_its_fragment(server: TokenServer) -> None:
    assert server.url == f"http://127.0.0.1:{server.port}/#token={TOKEN}"


async def test_the_page_and_its_files_are_for_anyone_and_hold_no_secret(server: TokenServer) -> None:
    status, page, headers = await get(server.public_url + "/")
    assert status == 200
    assert page.count(f'<script src="{PAGE_SCRIPT_PATH}"></script>') == 1
    assert page.index(PAGE_SCRIPT_PATH) > page.index("js/textual.js")  # after textual.js has set window.onload
    assert TOKEN not in page
    assert len(server.page_keys) == 0  # no key is made for a page; its script asks with the token
    status, script, headers = await get(server.public_url + PAGE_SCRIPT_PATH)
    assert (status, headers["Content-Type"].split(";")[0]) == (200, "text/javascript")
    assert "Authorization" in script and "sessionStorage" in script
    status, textual, _ = await get(server.public_url + "/static/js/textual.js")
    assert status == 200
    assert "WebSocket" in textual


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/", 200),
        ("GET", PAGE_SCRIPT_PATH, 200),
        ("GET", "/static/js/textual.js", 200),
        ("POST", "/key", 403),
        ("GET", "/ws", 403),
        ("GET", "/ws/made-up", 403),
        ("GET", "/download/key", 404),
        ("GET", "/nothing-here", 404),
    ],
)
async def test_every_answer_sets_no_cookie_and_keeps_the_page_to_itself(
    server: TokenServer, method: str, path: str, status: int
) -> None:
    headers = {"Origin": server.public_url, "Authorization": f"Bearer {TOKEN}x"}
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, server.public_url + path, headers=headers, allow_redirects=False) as answer,
    ):
        assert answer.status == status
        assert "Set-Cookie" not in answer.headers
        assert {name: answer.headers.get(name) for name in SAFE_HEADERS} == SAFE_HEADERS
    assert SAFE_HEADERS["Referrer-Policy"] == "no-referrer"
    assert SAFE_HEADERS["Cache-Control"] == "no-store"
    assert SAFE_HEADERS["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "frame-ancestors 'none'" in SAFE_HEADERS["Content-Security-Policy"]


async def test_a_page_key_is_had_for_the_token_in_the_authorization_header_only(server: TokenServer) -> None:
    assert (await post_key(server))[0] == 403
    for wrong in ("wrong", TOKEN[:-1], TOKEN + "x", "été", f" {TOKEN}"):
        assert (await post_key(server, Authorization=f"Bearer {wrong}"))[0] == 403, wrong
    assert (await post_key(server, Authorization=f"bearer {TOKEN}"))[0] == 403
    assert (await post_key(server, Authorization=TOKEN))[0] == 403
    # The old ways, and whatever a browser would send on its own to any port: no way in.
    assert (await post_key(server, url=f"{server.public_url}/key?token={TOKEN}"))[0] == 403
    assert (await post_key(server, Cookie=f"polypilot_web_{server.port}={TOKEN}"))[0] == 403
    assert len(server.page_keys) == 0
    key_url = await page_key_url(server)
    assert re.fullmatch(rf"ws://127\.0\.0\.1:{server.port}/ws/[\w-]{{43}}", key_url), key_url
    assert TOKEN not in key_url


@pytest.mark.parametrize("origin", [None, "http://127.0.0.1:1", "http://localhost:{port}", "null", "http://evil"])
async def test_a_page_key_is_for_this_servers_page_only(server: TokenServer, origin: str | None) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession() as http:
        if origin is not None:
            headers["Origin"] = origin.format(port=server.port)
        async with http.post(f"{server.public_url}/key", headers=headers) as answer:
            assert answer.status == 403
    assert len(server.page_keys) == 0


async def test_the_websocket_opens_once_for_a_fresh_page_key(server: TokenServer) -> None:
    key_url = await page_key_url(server)
    assert await websocket(key_url, Origin=server.public_url) == 101
    assert await websocket(key_url, Origin=server.public_url) == 403  # replayed


async def test_the_websocket_refuses_no_key_a_made_up_one_and_the_token(server: TokenServer) -> None:
    ws = f"ws://127.0.0.1:{server.port}"
    cookie = f"polypilot_web_{server.port}={TOKEN}"
    assert await websocket(f"{ws}/ws", Origin=server.public_url, Cookie=cookie) == 403  # textual-serve's own
    assert await websocket(f"{ws}/ws/{'A' * 43}", Origin=server.public_url) == 403
    assert await websocket(f"{ws}/ws/{TOKEN}", Origin=server.public_url, Authorization=f"Bearer {TOKEN}") == 403
    assert await websocket(f"{ws}/ws/", Origin=server.public_url) == 404  # an empty key is no route


@pytest.mark.parametrize("origin", [None, "http://127.0.0.1:1", "http://localhost:{port}"])
async def test_the_websocket_refuses_a_good_key_from_another_origin_and_keeps_it(
    server: TokenServer, origin: str | None
) -> None:
    key_url = await page_key_url(server)
    headers = {} if origin is None else {"Origin": origin.format(port=server.port)}
    assert await websocket(key_url, **headers) == 403
    assert await websocket(key_url, Origin=server.public_url) == 101  # refused for the origin alone


async def test_a_page_key_expires(server: TokenServer, clock: FakeClock) -> None:
    late, in_time = await page_key_url(server), await page_key_url(server)
    await clock.advance(PAGE_KEY_SECONDS)
    assert await websocket(in_time, Origin=server.public_url) == 101  # to the end of its life
    await clock.advance(0.001)
    assert await websocket(late, Origin=server.public_url) == 403


async def test_page_keys_are_single_use_short_lived_and_bounded() -> None:
    clock = FakeClock()
    keys = PageKeys(clock, lifetime=10.0, most=3)
    first, second = keys.mint(), keys.mint()
    assert first != second and len(first) >= 43
    assert keys.redeem(first)
    assert not keys.redeem(first)
    assert not keys.redeem("never-made")
    assert not keys.redeem("")
    assert [keys.mint() for _ in range(3)] and len(keys) == 3  # the oldest (second) went first
    assert not keys.redeem(second)
    stale = keys.mint()
    await clock.advance(10.5)
    assert not keys.redeem(stale)
    keys.mint()
    assert len(keys) == 1  # the expired were forgotten at the next mint


@pytest.mark.parametrize(
    ("header", "shown"),
    [
        (f"Bearer {TOKEN}", True),
        (None, False),
        ("", False),
        ("Bearer ", False),
        (f"Bearer {TOKEN} ", False),
        (f"Basic {TOKEN}", False),
        (f"Bearer {TOKEN[:-1]}", False),
        ("Bearer \udcff", False),
    ],
)
def test_shows_token_wants_exactly_bearer_and_the_token(header: str | None, shown: bool) -> None:
    assert shows_token(header, TOKEN) is shown


async def test_the_dashboard_process_sees_neither_the_token_nor_the_page_key(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    part = tmp_path / "seen.part"  # renamed when whole: the test reads it once it exists
    dump = (
        f"import os, sys; open({str(part)!r}, 'w').write(repr((sys.argv, dict(os.environ))));"
        f" os.replace({str(part)!r}, {str(seen)!r})"
    )
    server = TokenServer(shlex.join([sys.executable, "-c", dump]), listen("127.0.0.1", 0), TOKEN, FakeClock())
    await server.start()
    try:
        key_url = await page_key_url(server)
        assert await websocket(key_url, Origin=server.public_url) == 101
        await until(seen.exists, 10, "the dashboard command to run")
        text = seen.read_text()
        assert "TEXTUAL_DRIVER" in text  # it is the process textual-serve started for the page
        assert TOKEN not in text
        assert key_url.rsplit("/", 1)[1] not in text
    finally:
        await server.stop()
        gc.collect()


async def test_another_host_name_is_refused(server: TokenServer) -> None:
    # A page of evil.example whose name was re-pointed at 127.0.0.1 (DNS rebinding).
    assert (await get(server.public_url + "/", Host=f"evil.example:{server.port}"))[0] == 403
    status, _ = await post_key(server, Host=f"evil.example:{server.port}", Authorization=f"Bearer {TOKEN}")
    assert status == 403
    assert (await get(server.public_url + "/", Host=f"127.0.0.1:{server.port + 1}"))[0] == 403


async def test_localhost_is_sent_to_the_canonical_address_the_page_keys_want(server: TokenServer) -> None:
    status, _, headers = await get(server.public_url + "/?fontsize=12", Host=f"localhost:{server.port}")
    assert status == 307
    assert headers["Location"] == f"{server.public_url}/?fontsize=12"  # the browser keeps the #token
    status, _ = await post_key(server, Host=f"localhost:{server.port}", Authorization=f"Bearer {TOKEN}")
    assert status == 307
    assert len(server.page_keys) == 0


def listening_on(port: int) -> list[str]:
    """The addresses (hex, as /proc shows them) with a TCP socket listening on ``port``, one per
    socket: a table longer than a page is read in several reads, and a socket opened or closed
    meanwhile (another test's) can show a row twice, so rows are told apart by their inode."""
    found: dict[str, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in [line.split() for line in Path(table).read_text().splitlines()[1:]]:
            address, hex_port = row[1].split(":")
            if row[3] == "0A" and int(hex_port, 16) == port:
                found.setdefault(row[9], address)
    return list(found.values())


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


IPV6_LOOPBACK_HEX = "00000000000000000000000001000000"
needs_ipv6 = pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback here")


async def test_the_server_listens_on_loopback_only(server: TokenServer) -> None:
    assert server.socks[0].getsockname() == ("127.0.0.1", server.port)
    expected = ["0100007F", IPV6_LOOPBACK_HEX] if has_ipv6_loopback() else ["0100007F"]
    assert listening_on(server.port) == expected  # 127.0.0.1 and ::1, and nothing else


@needs_ipv6
async def test_no_one_else_can_listen_where_a_browser_looks_for_localhost(server: TokenServer) -> None:
    # Chromium tries localhost:PORT on ::1 first: another user listening there would get the
    # page, and its script the #token (tried by hand: it did, before the twin was held).
    with socket.socket(socket.AF_INET6) as other, pytest.raises(OSError) as taken:
        other.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        other.bind(("::1", server.port))
        other.listen()
    assert taken.value.errno == errno.EADDRINUSE
    # What reaches the twin is sent to the canonical address, where the page's origin is.
    status, _, headers = await get(f"http://[::1]:{server.port}/", Host=f"localhost:{server.port}")
    assert (status, headers["Location"]) == (307, f"{server.public_url}/")


@needs_ipv6
def test_a_port_whose_twin_another_program_holds_is_not_used(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket(socket.AF_INET6) as other:
        other.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        other.bind(("::1", 0))
        other.listen()
        port = other.getsockname()[1]
        with pytest.raises(OSError, match="localhost") as refused:
            listen("127.0.0.1", port)
        assert refused.value.errno == errno.EADDRINUSE
        assert listening_on(port) == [IPV6_LOOPBACK_HEX]  # 127.0.0.1:port was let go
        assert main(["web", "--port", str(port)]) == 2
        assert "taken by another program" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["0.0.0.0", "", "::", "192.168.1.10", "example.com", "127.0.0.2", "localhost.evil"])
def test_a_host_that_is_not_loopback_is_refused(host: str) -> None:
    with pytest.raises(NotLoopback, match="loopback only"):
        bind_address(host)
    with pytest.raises(NotLoopback):
        listen(host, 0)


def test_the_loopback_names_bind_loopback_addresses() -> None:
    assert [bind_address(h) for h in ("127.0.0.1", "localhost", "LocalHost", "::1")] == [
        "127.0.0.1",
        "127.0.0.1",
        "127.0.0.1",
        "::1",
    ]


@needs_ipv6
def test_ipv6_loopback_binds_there_and_holds_127_0_0_1() -> None:
    socks = listen("::1", 0)
    try:
        assert [s.family for s in socks] == [socket.AF_INET6, socket.AF_INET]
        assert socks[0].getsockname()[0] == "::1"
        assert socks[1].getsockname() == ("127.0.0.1", socks[0].getsockname()[1])
        server = TokenServer(NO_DASHBOARD, socks, TOKEN)
        assert server.url == f"http://[::1]:{server.port}/#token={TOKEN}"
    finally:
        for sock in socks:
            sock.close()


@pytest.mark.timeout(10)  # were it accepted, the server would run until killed
def test_polypilot_web_refuses_another_host_with_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "loopback only" in err
    assert "'0.0.0.0'" in err


def test_the_dashboard_command_is_this_python_with_the_agents_file(tmp_path: Path) -> None:
    agents = tmp_path / "my agents.toml"
    argv = shlex.split(dashboard_command(agents))
    assert argv == [sys.executable, "-P", "-m", "polypilot_tui", "--agents-file", str(agents.resolve())]
    assert shlex.split(dashboard_command()) == [sys.executable, "-P", "-m", "polypilot_tui"]
    assert shlex.split(dashboard_command(in_process=True))[-1] == "--in-process"
