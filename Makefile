# Two entry points for a fresh clone with only python3 present:
#   make dev   - venv, install doemu and what serving needs (no dev toolchain), serve the example
#   make test  - venv (if missing), install with dev extras, run lint, types, the docs build and
#                the whole suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# What `make dev` installs (doemu's own dependencies) and what the tools need on top (the
# `dev` extra: pytest, mypy, ruff, Playwright, the provider SDKs). `make test` goes from either.
SERVE  := $(VENV)/.installed
STAMP  := $(VENV)/.installed-dev

.PHONY: dev test lint typecheck docs unit e2e bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# With PYTHONDONTWRITEBYTECODE set in the environment (make passes it on), nothing ever writes the
# .pyc files of an editable install, and every `doemu dev` compiles the ~100 doemu modules it
# imports again: 60-80 ms of each restart. compileall writes them whatever that variable says; a
# source edited later is compiled in memory again (its .pyc is stale) until compileall reruns.
$(SERVE): $(BIN)/python pyproject.toml setup.py
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python -m compileall -q doemu agents
	touch $(SERVE)

$(STAMP): $(BIN)/python pyproject.toml setup.py
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m compileall -q doemu agents
	touch $(SERVE) $(STAMP)

# A venv that has the dev extra already is good for serving too (no reinstall).
dev: $(if $(wildcard $(STAMP)),$(STAMP),$(SERVE))
	cd examples/counter && ../../$(BIN)/doemu dev

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

# The documentation site (mkdocs.yml): strict, so a broken link, a missing anchor or a page left
# out of the navigation fails the build (and `make test`). The site goes to .site/ (ignored).
# Not --quiet: it hides the warnings, and strict mode then has nothing to fail on.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The suite runs on WORKERS pytest-xdist worker processes (2: the machine the suite is sized for
# has 2 cores; most of a serial run's time is spent waiting on servers, not computing). Whole
# modules go to one worker (--dist loadfile), so module-scoped servers start once per module;
# what two modules share on disk is locked (tests/locks.py). WORKERS=0 runs it in one process.
WORKERS ?= 2
PYTEST := $(BIN)/pytest -q $(if $(filter-out 0,$(WORKERS)),-n $(WORKERS) --dist loadfile)

unit: $(STAMP)
	$(PYTEST) tests

e2e: $(STAMP)
	$(PYTEST) e2e

test: $(STAMP) lint typecheck docs
	$(PYTEST)

bench: $(STAMP)
	bash bench/run.sh

clean:
	rm -rf $(VENV) .doemu .mypy_cache .ruff_cache .site
