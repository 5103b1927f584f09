"""Which variables of the environment an agent's ``pass_env`` may name.

Standard library only: the raw reading a headless run starts its CLI on (agents/raw_agent.py)
applies the same rule as the agents file's model, before the models or dataclasses load.
"""

from __future__ import annotations


def pass_env_problem(name: str) -> str | None:
    """Why ``name`` cannot be in an agent's ``pass_env`` (a variable's name, or a prefix of 3 or
    more characters ending in ``*``), or None. One rule for the agents file's model and for the
    raw reading a headless run starts its CLI on (agents/raw_agent.py)."""
    stem = name.removesuffix("*")
    if not stem.replace("_", "").isalnum() or len(stem) < 3:
        # "*" or "A*" would hand the agent every secret of the environment.
        return f"pass_env: {name!r} is not a variable name or a prefix of 3 or more characters"
    return None
