"""A terminal that goes away without a SIGHUP to the dashboard (its other end closed while the
hangup went to another process group, or to none): the dashboard used to spin a core for good
on its input's endless empty reads. It now quits as on SIGHUP: drafts saved, exit 129."""

from __future__ import annotations

import os
import time
from pathlib import Path

from polypilot_tui.ui.ui_state import load_ui_state
from tests.reliability.conftest import Dashboard, clean_env
from tests.support.waiting import until_blocking


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_terminal_closed_without_a_hangup_ends_the_dashboard_instead_of_spinning(tmp_path: Path) -> None:
    state = tmp_path / "state"
    # A session of its own with no controlling terminal: closing the pty's other end sends it no SIGHUP.
    dashboard = Dashboard(clean_env(state))
    try:
        dashboard.wait_for_lock(state)
        until_blocking(lambda: "Enter sends" in dashboard.text(), 30, "the prompt drawn")
        dashboard.type(b"a draft kept")
        until_blocking(lambda: "a draft kept" in dashboard.text(), 10, "the draft typed")
        os.close(dashboard.master)  # the terminal window is gone
        began = time.monotonic()
        code = dashboard.proc.wait(30)
        took = time.monotonic() - began
    finally:
        dashboard.close()
    assert code == 129, code  # as on SIGHUP
    assert took < 15, took
    assert list(load_ui_state(state)[0].drafts.values()) == ["a draft kept"]


def test_while_the_terminal_is_there_the_dashboard_stays_and_idles(tmp_path: Path) -> None:
    state = tmp_path / "state"
    dashboard = Dashboard(clean_env(state))
    try:
        dashboard.wait_for_lock(state)
        until_blocking(lambda: "Enter sends" in dashboard.text(), 30, "the prompt drawn")
        before = cpu_seconds(dashboard.proc.pid)
        time.sleep(5)  # a span of real time to measure CPU over, not a synchronisation
        assert dashboard.proc.poll() is None  # the terminal check does not quit a live terminal
        assert cpu_seconds(dashboard.proc.pid) - before < 1.0
    finally:
        dashboard.close()
