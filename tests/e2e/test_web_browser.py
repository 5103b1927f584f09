"""``polypilot web`` in a real headless Chromium: open the printed URL, send a prompt, see the reply.

The browser is Debian's ``chromium`` driven through ``chromium-driver`` by selenium (never a
downloaded browser). The page's terminal is xterm.js drawing on a canvas, so the test reads
what the page received instead: a script installed before the page's own wraps ``WebSocket``
and keeps the text of every frame the dashboard sent. The reply is also confirmed in the
state folder's history. Every wait is bounded; the server and the browser are stopped in a
``finally``. Without chromium the test is skipped, except with ``CI=true``, where it fails.
"""

from __future__ import annotations

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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polypilot_tui.storage.lock import lock_holder
from tests.support.engine_service import engine_env, short_state_dir

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
# Keeps the text of every frame the page's websocket receives, for the test to read.
RECORD_FRAMES = """
(() => {
  const Native = window.WebSocket;
  const decoder = new TextDecoder();
  window.__terminalText = "";
  window.WebSocket = function (url, protocols) {
    const socket = protocols === undefined ? new Native(url) : new Native(url, protocols);
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
ESCAPES = re.compile(
    r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78DEMc]"
)


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


def wait_until(what: str, seconds: float, probe: Callable[[], Any]) -> Any:
    """Poll ``probe`` until it returns something true, or fail naming ``what``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if result := probe():
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out after {seconds:.0f}s waiting for {what}")


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
    wait_until("the engine to stop", 30, lambda: lock_holder(state) is None)


@pytest.fixture
def state() -> Iterator[Path]:
    """The state folder: short, since the engine's Unix socket lives in it; removed after."""
    folder = short_state_dir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_prompt_typed_in_the_browser_gets_the_demo_agents_reply(state: Path, tmp_path: Path) -> None:
    chromium, chromedriver = browser_binaries()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    started = time.monotonic()
    home = tmp_path / "home"
    home.mkdir()
    proc, lines, env = start_server(state, home)
    output: list[str] = []
    driver = None
    try:

        def printed_url() -> str | None:
            while not lines.empty():
                output.append(lines.get_nowait())
            return next((line.strip() for line in output if line.startswith("http://")), None)

        url = wait_until("the printed URL", 20, printed_url)
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{40,}", url), url

        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium'}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
        driver.set_page_load_timeout(30)
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_FRAMES})
        driver.get(url)

        def screen() -> str:
            return ESCAPES.sub("", driver.execute_script("return window.__terminalText || ''"))

        wait_until("the dashboard to draw", 45, lambda: "type a prompt" in screen())
        # The prompt's placeholder ends in "↑ history" only when the dashboard is wider than 80
        # columns: it must take the browser's width (COLUMNS), not the 80 of a missing terminal.
        wait_until("the dashboard to use the page's width", 10, lambda: "↑ history" in screen())
        driver.execute_script("document.querySelector('.xterm-helper-textarea').focus()")
        ActionChains(driver).send_keys(PROMPT).perform()
        ActionChains(driver).send_keys(Keys.ENTER).perform()
        try:
            wait_until("the reply on the page", 30, lambda: "runs offline" in screen().split(PROMPT, 1)[-1])
        except AssertionError:
            driver.save_screenshot(str(tmp_path / "web-failed.png"))
            (tmp_path / "web-failed.txt").write_text(screen())
            raise AssertionError(f"no reply on the page; see {tmp_path}/web-failed.png and .txt") from None
        rows = wait_until("the reply in the history", 15, lambda: [r for r in history(state) if r[0] == "assistant"])
        assert f"You said: **{PROMPT}**" in rows[-1][1]
        assert ("user", PROMPT) in history(state)
        driver.save_screenshot(str(tmp_path / "web.png"))
        print(f"browser test: reply after {time.monotonic() - started:.1f}s; screenshot {tmp_path / 'web.png'}")
    finally:
        # The server first, while the page is still connected: its dashboard must be told to quit.
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        if driver is not None:
            driver.quit()
        engine_outlived_the_page = lock_holder(state) is not None
        stop_engine(state, env)
    assert proc.returncode == 0, "".join(output)
    assert engine_outlived_the_page  # the page's dashboard attached to an engine, which keeps the sessions
    # Its dashboards went with the server (told to quit, not left behind).
    wait_until("the dashboards to quit with the server", 10, lambda: process_group(proc.pid) == [])
    token = url.split("token=", 1)[1]
    written = [p for p in state.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    assert written == [], f"the token was written to {written}"
    assert sum(token in line for line in output) == 1  # printed once, in the URL
