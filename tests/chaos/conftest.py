"""Chaos fixtures: a driver per (scenario, backend) cell. The matrix table itself is the
plugin in tests/chaos/matrix.py (registered from tests/conftest.py)."""
