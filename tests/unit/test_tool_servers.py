"""Tool servers as the engine describes them, and their secrets kept out of what is written."""

from __future__ import annotations

import pytest

from polypilot_tui.domain.tool_servers import (
    CAPABILITY_ENV,
    MAX_FIELD_CHARS,
    MAX_SERVERS,
    ToolServer,
    capability_of,
    checked,
    relay_server,
)
from polypilot_tui.infra.redact import REDACTED, Redactor

RELAY = relay_server("/usr/bin/python3", "/run/pp/engine.sock", "cap-1234567890", "/run/pp/relay.log")


def test_the_relay_is_described_once_with_its_capability_in_its_env() -> None:
    assert (
        ToolServer(
            "polypilot",
            "/usr/bin/python3",
            (
                "-P",
                "-m",
                "polypilot_tui.service.mcp_relay",
                "--socket",
                "/run/pp/engine.sock",
                "--log",
                "/run/pp/relay.log",
            ),
            ((CAPABILITY_ENV, "cap-1234567890"),),
        )
        == RELAY
    )
    assert capability_of((ToolServer("other", "/bin/x"), RELAY)) == "cap-1234567890"
    assert capability_of((ToolServer("other", "/bin/x", env=(("TOKEN", "t-123456789"),)),)) == ""
    assert RELAY.secrets == ("cap-1234567890",)
    assert checked((RELAY,)) == (RELAY,)


@pytest.mark.parametrize(
    ("servers", "words"),
    [
        ((ToolServer("team tools", "/bin/x"),), "name must be 1-64 letters"),
        ((ToolServer("", "/bin/x"),), "name must be 1-64 letters"),
        ((ToolServer("t", "python3"),), "must be an absolute path"),
        ((ToolServer("t", "/bin/x", env=(("A=B", "1"),)),), "is not an environment variable's name"),
        ((ToolServer("t", "/bin/x", ("a" * (MAX_FIELD_CHARS + 1),)),), f"over {MAX_FIELD_CHARS} chars"),
        ((ToolServer("t", "/bin/x", ("a\x00b",)),), "holds NUL"),
        ((ToolServer("t", "/bin/x", tuple("a" * 33)),), "33 arguments, at most 32"),
        ((RELAY, RELAY), "two tool servers share a name"),
        (tuple(ToolServer(f"t{i}", "/bin/x") for i in range(MAX_SERVERS + 1)), f"at most {MAX_SERVERS}"),
    ],
)
def test_a_server_no_agent_could_start_is_refused_naming_why(servers: tuple[ToolServer, ...], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        checked(servers)


@pytest.mark.parametrize(
    "entry",
    [
        {"name": CAPABILITY_ENV, "value": "c0ffee-not-learned"},
        {"name": "GITHUB_TOKEN", "value": "plain-words-value"},
        {"name": "Authorization", "value": "Basic dXNlcjpwYXNz"},
        {"name": "X-Api-Key", "value": "k", "_meta": None},
    ],
)
def test_a_secret_in_acp_name_value_form_is_redacted_though_never_learned(entry: dict[str, object]) -> None:
    """ACP passes env variables and HTTP headers as ``[{name, value}]``: the name says the value is a secret."""
    clean = Redactor().scrub({"mcpServers": [{"name": "polypilot", "env": [entry]}]})
    assert clean["mcpServers"][0]["env"][0] == {**entry, "value": REDACTED}
    assert clean["mcpServers"][0]["name"] == "polypilot"


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "PATH", "value": "/usr/bin:/bin"},
        {"name": "polypilot", "value": "a server's name"},
        {"name": "GITHUB_TOKEN", "value": ""},
        {"name": "GITHUB_TOKEN"},
    ],
)
def test_an_ordinary_name_value_entry_is_kept(entry: dict[str, object]) -> None:
    assert Redactor().scrub([entry]) == [entry]


def test_the_copilot_env_dict_form_of_the_capability_is_redacted() -> None:
    clean = Redactor().scrub({"polypilot": {"env": {CAPABILITY_ENV: "c0ffee-not-learned", "HOME": "/root"}}})
    assert clean == {"polypilot": {"env": {CAPABILITY_ENV: REDACTED, "HOME": "/root"}}}
