# Two commands on a fresh machine: `make run` and `make test`. Both create .venv and install.
# `make test` = lint (ruff, mypy, layer contracts) + the whole suite on the embedded Postgres,
# with Debian's Chromium for the inspector's browser tests (installed when missing, as root).
# Installs come from the committed lockfiles (requirements/*.txt, `make lock` writes them):
# run.txt for the service, test.txt for the suite (run.txt's pins plus the dev tools, the
# plots and the framework extras). uv installs them; it is itself pinned here.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := $(BIN)/uv
UV_VERSION := 0.13.9
INTO := --python $(BIN)/python --quiet
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
COMPILE := $(UV) pip compile pyproject.toml --universal --python-version 3.11 --no-header \
	--annotation-style line --quiet

.PHONY: run test install lint format openapi clean chromium lock

$(UV):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# The service's packages, added to whatever is there (after `make test` nothing is removed).
$(RUN_STAMP): requirements/run.txt pyproject.toml | $(UV)
	@# The old engine's package installs the same `pgserver` module: it must go first.
	$(UV) pip uninstall $(INTO) pgserver 2>/dev/null || true
	$(UV) pip install $(INTO) -r requirements/run.txt
	$(UV) pip install $(INTO) --no-deps -e .
	touch $@

# Exactly the suite's packages: anything else in the environment is removed.
$(TEST_STAMP): requirements/test.txt pyproject.toml | $(UV)
	$(UV) pip sync $(INTO) requirements/test.txt
	$(UV) pip install $(INTO) --no-deps -e .
	touch $@ $(RUN_STAMP)

install: $(TEST_STAMP)

run: $(RUN_STAMP)
	$(BIN)/ebbtide serve

lock: $(UV)
	$(COMPILE) --extra dev --extra plots --extra langchain --extra pydantic-ai \
		-o requirements/test.txt
	$(COMPILE) --constraint requirements/test.txt -o requirements/run.txt

test: lint chromium
	$(BIN)/pytest -n 2 --dist loadfile --durations=15 --cov=app --cov=ebbtide --cov-report=term --cov-fail-under=90
	$(BIN)/coverage report --include='app/core/*' --fail-under=100

chromium:
	bash scripts/ensure_chromium.sh

lint: $(TEST_STAMP)
	$(BIN)/ruff check app ebbtide tests scripts
	$(BIN)/ruff format --check app ebbtide tests scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(TEST_STAMP)
	$(BIN)/ruff format app ebbtide tests scripts
	$(BIN)/ruff check --fix app ebbtide tests scripts

openapi: $(TEST_STAMP)
	$(BIN)/ebbtide openapi --out openapi/openapi.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
