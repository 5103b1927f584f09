"""The network rule's entries and each agent kind's model endpoint, from its real configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polypilot_tui.agents.sandbox_net import EndpointError, model_endpoints, parse_endpoint, url_endpoint
from polypilot_tui.config import AgentConfig, ProviderConfig


@pytest.mark.parametrize(
    ("entry", "parsed"),
    [
        ("api.example.com:443", ("api.example.com", 443)),
        (" API.Example.COM.:443 ", ("api.example.com", 443)),
        ("127.0.0.1:8000", ("127.0.0.1", 8000)),
        ("[::0001]:8000", ("::1", 8000)),
        ("localhost:1", ("localhost", 1)),
    ],
)
def test_an_entry_is_one_spelling_of_host_and_port(entry: str, parsed: tuple[str, int]) -> None:
    assert parse_endpoint(entry) == parsed


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("example.com", "a port number is needed"),
        ("example.com:0", "1 to 65535"),
        ("example.com:70000", "1 to 65535"),
        ("::1:80", "in brackets"),
        ("[nope]:80", "not an IPv6 address"),
        ("0.0.0.0:80", "not an address to connect to"),
        ("*.example.com:443", "not a host name"),
        ("exa mple.com:443", "not a host name"),
        (":443", "not a host name"),
        ("a" * 64 + ".com:443", "not a host name"),
        ("http://example.com:8443/v1", r"a URL: write its host:port \(example.com:8443\)"),
    ],
)
def test_a_bad_entry_is_refused_with_why(entry: str, said: str) -> None:
    with pytest.raises(EndpointError, match=said):
        parse_endpoint(entry)


def test_a_url_gives_its_endpoint_with_the_schemes_port() -> None:
    assert url_endpoint("http://127.0.0.1:8000/v1") == "127.0.0.1:8000"
    assert url_endpoint("https://Models.Example.com/v1") == "models.example.com:443"
    assert url_endpoint("http://[::1]/v1") == "[::1]:80"
    assert url_endpoint("127.0.0.1:8000/v1") is None
    assert url_endpoint("ftp://example.com") is None


def test_copilot_with_a_provider_or_its_variable() -> None:
    with_provider = AgentConfig(name="c", kind="copilot", provider=ProviderConfig(base_url="http://127.0.0.1:9000/v1"))
    assert model_endpoints(with_provider, {}) == ("127.0.0.1:9000",)
    plain = AgentConfig(name="copilot", kind="copilot")
    assert model_endpoints(plain, {"COPILOT_PROVIDER_BASE_URL": "https://llm.corp.example/v1"}) == (
        "llm.corp.example:443",
    )
    # signed in to GitHub: its hosts are not known here, and nothing is guessed
    assert model_endpoints(plain, {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}) == ()


def test_copilot_over_acp_reads_its_variable() -> None:
    agent = AgentConfig(name="copilot-acp", kind="acp", command="/opt/bin/copilot", args=["--acp"])
    assert model_endpoints(agent, {"COPILOT_PROVIDER_BASE_URL": "http://localhost:7000"}) == ("localhost:7000",)


def _opencode_config(provider_url: str, *, model: str = "mock/m") -> dict[str, object]:
    return {
        "model": model,
        "provider": {
            "mock": {"options": {"baseURL": provider_url}},
            "unused": {"options": {"baseURL": "http://unused.example:1/v1"}},
        },
    }


def test_opencode_reads_the_chosen_providers_base_url(tmp_path: Path) -> None:
    agent = AgentConfig(name="oc", kind="acp", command="/x/opencode", args=["acp"])
    content = json.dumps(_opencode_config("http://127.0.0.1:8100/v1"))
    assert model_endpoints(agent, {"OPENCODE_CONFIG_CONTENT": content, "HOME": str(tmp_path)}) == ("127.0.0.1:8100",)
    # from its config file, as opencode finds it
    folder = tmp_path / "xdg" / "opencode"
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text(json.dumps(_opencode_config("https://m.example/v1")))
    assert model_endpoints(agent, {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}) == ("m.example:443",)
    named = tmp_path / "named.json"
    named.write_text(json.dumps(_opencode_config("http://127.0.0.1:8200/v1")))
    assert model_endpoints(agent, {"OPENCODE_CONFIG": str(named), "HOME": str(tmp_path)}) == ("127.0.0.1:8200",)
    # broken or JSONC: nothing known, nothing guessed
    named.write_text("{ // a comment\n}")
    assert model_endpoints(agent, {"OPENCODE_CONFIG": str(named), "HOME": str(tmp_path)}) == ()


def test_codex_reads_its_variable_or_the_chosen_provider(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text(
        'model_provider = "mock"\n'
        '[model_providers.mock]\nbase_url = "http://127.0.0.1:8300/v1"\n'
        '[model_providers.other]\nbase_url = "http://other.example/v1"\n'
    )
    agent = AgentConfig(name="codex", kind="acp", command="codex-acp", env={"CODEX_HOME": str(home)})
    assert model_endpoints(agent, {}) == ("127.0.0.1:8300",)
    assert model_endpoints(agent, {"OPENAI_BASE_URL": "https://gw.example/v1"}) == ("gw.example:443", "127.0.0.1:8300")
    (home / "config.toml").write_text("model_provider = [broken")
    assert model_endpoints(agent, {}) == ()


def test_the_demo_agent_and_an_unknown_one_need_none() -> None:
    assert model_endpoints(AgentConfig(name="demo", kind="demo"), {"OPENAI_BASE_URL": "http://x:1"}) == ()
    mine = AgentConfig(name="mine", kind="acp", command="my-agent")
    assert model_endpoints(mine, {"OPENAI_BASE_URL": "http://x:1", "ANTHROPIC_BASE_URL": "http://y:2"}) == ()
