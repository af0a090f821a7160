# Two commands on a fresh machine: `make run` and `make test`. Both create .venv and install.
# `make test` = lint (ruff, mypy, layer contracts) + the whole suite on the embedded Postgres,
# with Debian's Chromium for the inspector's browser tests (installed when missing, as root).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint format openapi clean chromium

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@# The old engine's package installs the same `pgserver` module: it must go first.
	$(BIN)/pip uninstall --quiet --yes pgserver 2>/dev/null || true
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/ebbtide serve

test: lint chromium
	$(BIN)/pytest -n 2 --dist loadfile --durations=15 --cov=app --cov=ebbtide --cov-report=term --cov-fail-under=90
	$(BIN)/coverage report --include='app/core/*' --fail-under=100

chromium:
	bash scripts/ensure_chromium.sh

lint: $(STAMP)
	$(BIN)/ruff check app ebbtide tests scripts
	$(BIN)/ruff format --check app ebbtide tests scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format app ebbtide tests scripts
	$(BIN)/ruff check --fix app ebbtide tests scripts

openapi: $(STAMP)
	$(BIN)/ebbtide openapi --out openapi/openapi.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
