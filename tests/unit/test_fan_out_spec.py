"""``--fan-out AGENT:N,…`` read as one agent per attempt; every wrong spelling refused, naming
the part that is wrong."""

from __future__ import annotations

import pytest

from polypilot_tui.domain.fan_out import MAX_ATTEMPTS, FanOutSpecError, parse_fan_out, spec_of


@pytest.mark.parametrize(
    ("spec", "agents"),
    [
        ("copilot:2,opencode:1", ("copilot", "copilot", "opencode")),
        ("copilot", ("copilot",)),
        (" copilot : 2 , opencode ", ("copilot", "copilot", "opencode")),
        ("a:1,b:1,a:1", ("a", "b", "a")),
        (f"demo:{MAX_ATTEMPTS}", ("demo",) * MAX_ATTEMPTS),
    ],
)
def test_a_spec_is_one_agent_per_attempt(spec: str, agents: tuple[str, ...]) -> None:
    assert parse_fan_out(spec) == agents


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("copilot:0", "the count must be 1 or more"),
        (":x", "names no agent"),
        (":2", "names no agent"),
        ("copilot:x", "whole number"),
        ("copilot:-1", "whole number"),
        ("copilot:1.5", "whole number"),
        ("copilot:\u00b2", "whole number"),  # a superscript two is a digit to Python, not a count
        ("copilot:", "whole number"),
        ("copilot,,opencode", "names no agent"),
        ("", "name the agents"),
        (" , ", "names no agent"),
        (f"demo:{MAX_ATTEMPTS + 1}", f"more than {MAX_ATTEMPTS} attempts"),
        ("demo:99999999999999999999", f"more than {MAX_ATTEMPTS} attempts"),
        ("a:5,b:5", f"more than {MAX_ATTEMPTS} attempts"),
    ],
)
def test_a_wrong_spec_is_refused_saying_why(spec: str, words: str) -> None:
    with pytest.raises(FanOutSpecError, match=words):
        parse_fan_out(spec)


def test_agents_are_written_back_as_a_spec() -> None:
    assert spec_of(("copilot", "opencode", "copilot")) == "copilot:2,opencode:1"
    assert parse_fan_out(spec_of(("x", "y", "y"))) == ("x", "y", "y")
