"""What the chaos matrix is made of: the scenarios (rows) and the backends (columns).

To add a backend, add one entry to :data:`BACKENDS` (a real agent CLI on the scripted model
server is one ``drivers.model_server_driver(...)`` call); every scenario it has a prompt for
then runs on it, and the others show in the table with their ``not_applicable`` reason.
"""

from __future__ import annotations

from tests.chaos.copilot_driver import CopilotDriver
from tests.chaos.drivers import CodexDriver, DemoDriver, Driver, FakeAcpDriver, OpencodeDriver

SCENARIOS: dict[str, str] = {
    "zero-idle": "the turn ends but session.idle never comes",
    "hang-after-final-tool": "the final tool result (and reply) arrive, then nothing",
    "model-hang": "the model hangs before its first token",
    "dead-send": "the prompt is accepted and silently swallowed",
    "usage-flood": "only usage events arrive (they are not progress)",
    "long-tool": "a tool runs longer than every tier but the tool tier: must NOT be killed",
    "tool-hang": "a tool never returns",
    "permission-loss": "3 of 5 tool results are permission denials, successes interleaved",
    "recovery-fails": "the permission recovery's reconnect fails (network drop during resume)",
    "sigkill-mid-tool": "the agent process dies (SIGKILL) while a tool runs",
    "restart-mid-turn": "the app quits mid-turn; a new manager adopts the session",
    "stop-during-recovery": "the user presses Stop while a recovery reconnects",
    "double-stop": "Stop pressed twice at once during a streaming turn",
    "reconnect-during-turn": "Reconnect pressed during a streaming turn",
    "twenty-sessions": "20 sessions fault at once",
}

BACKENDS: dict[str, type[Driver]] = {
    "demo": DemoDriver,
    "fake-acp": FakeAcpDriver,
    "codex": CodexDriver,
    "opencode": OpencodeDriver,
    "copilot": CopilotDriver,  # tests/chaos/copilot_driver.py
}
