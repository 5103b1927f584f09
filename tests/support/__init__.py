"""Test helpers shared by the unit, agent and end-to-end suites."""
