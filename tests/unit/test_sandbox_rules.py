"""The sandbox's pure rules: what a path may be written, and the choice's words."""

from __future__ import annotations

from polypilot_tui.domain.sandbox import NO_SANDBOX, Sandbox, SandboxMode, SandboxRules, within


def test_within_is_lexical_and_exact_at_the_boundary() -> None:
    assert within("/w/repo", "/w/repo")
    assert within("/w/repo/a/b", "/w/repo/")
    assert not within("/w/repository", "/w/repo")  # a sibling that shares a prefix
    assert not within("/w/repo/../other/x", "/w/repo")  # .. leaves the folder
    assert not within("/w", "/w/repo")


def test_may_write_only_inside_writable_and_never_in_protected_or_hidden() -> None:
    rules = SandboxRules(
        writable=("/w/repo", "/home/u/.copilot"),
        protected=("/w/repo/.git/hooks", "/w/repo/.git/config"),
        hidden=("/home/u/.ssh",),
    )
    assert rules.may_write("/w/repo/src/x.py")
    assert rules.may_write("/home/u/.copilot/session-state/a")
    assert not rules.may_write("/w/repo/.git/hooks/pre-commit")
    assert not rules.may_write("/w/repo/.git/config")
    assert rules.may_write("/w/repo/.git/configs")  # only the protected path itself and below
    assert not rules.may_write("/home/u/.ssh/authorized_keys")
    assert not rules.may_write("/etc/passwd")
    assert not rules.may_write("/w/repo/../../etc/passwd")


def test_lines_say_every_rule() -> None:
    rules = SandboxRules(writable=("/w",), hidden=("/h",), network=("127.0.0.1:9",))
    text = "\n".join(rules.lines())
    assert "writes: /w" in text and "hidden: /h" in text and "only 127.0.0.1:9" in text
    assert "as the machine's" in "\n".join(SandboxRules(writable=("/w",)).lines())


def test_choice_label() -> None:
    assert NO_SANDBOX.label() == "" and not NO_SANDBOX.on
    assert Sandbox(SandboxMode.WORKSPACE).label() == "sandbox"
    assert Sandbox(SandboxMode.WORKSPACE, network=()).label() == "sandbox · net rule"
