# Two commands on a fresh machine with only python3 and make: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Tests run in parallel; real-agent tests are bounded and CI has 2 cores.
PYTEST_ARGS ?= -n auto --dist loadgroup -q --durations=25
# Real agents from npm are installed into the checkout (ignored by git), not the user cache.
export POLYPILOT_NPM_CACHE ?= $(CURDIR)/.cache/npm

.PHONY: run test test-fast bench lint clean snapshots

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/polypilot

# Lint first: seconds, and a red lint names the line where a red test names only a symptom.
lint: $(STAMP)
	$(VENV)/bin/ruff check polypilot_tui tests bench
	$(VENV)/bin/ruff format --check polypilot_tui tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

test: lint
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS) -m "not e2e"

bench: $(STAMP)
	$(PY) -m bench

snapshots: $(STAMP)
	$(PY) -m pytest tests/snapshots --snapshot-update -q

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
