"""``polypilot run`` keeps the terminal for the agent's words: an update the ACP SDK's schema
rejects (claude-agent-acp sends ``usage_update`` with ``"used": null``) prints no traceback and
leaves none in ``run.log`` (it is mapped from the raw message, field by field: no failure), and
the rest of the turn still arrives."""

from __future__ import annotations

from pathlib import Path

from tests.reliability.conftest import clean_env, fake_agents_file, polypilot


def test_a_schema_rejected_update_prints_no_traceback_and_logs_none(tmp_path: Path) -> None:
    state = tmp_path / "state"
    agents = fake_agents_file(tmp_path / "agents.toml", env={"FAKE_ACP_STATE": str(tmp_path / "agent-state")})
    done = polypilot(
        clean_env(state), "--agents-file", str(agents), "run", "--agent", "fake", "BADUPDATE then BADUPDATE"
    )
    assert done.returncode == 0, done.stderr
    assert "Hello from the fake agent." in done.stdout  # what was usable arrived
    assert "Traceback" not in done.stderr and "ValidationError" not in done.stderr
    log = state / "run.log"
    said = log.read_text() if log.exists() else ""
    assert "Traceback" not in said and "ValidationError" not in said and "ERROR" not in said, said
