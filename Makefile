# Two entry points for a fresh clone with only python3 present:
#   make dev   - venv, install, serve the bundled example
#   make test  - venv (if missing), install with dev extras, run lint, types and the whole suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev

.PHONY: dev test lint typecheck unit e2e bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

dev: $(STAMP)
	cd examples/counter && ../../$(BIN)/doemu dev

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q tests

e2e: $(STAMP)
	$(BIN)/pytest -q e2e

test: $(STAMP) lint typecheck
	$(BIN)/pytest -q

bench: $(STAMP)
	bash bench/run.sh

clean:
	rm -rf $(VENV) .doemu .mypy_cache .ruff_cache
