# The two commands a user types: `make run` (the whole system on this machine) and `make test`.
# Each creates .venv and installs what it needs; as root, `make test` also installs the Debian
# packages the real-part tests use (containerd, runc, busybox-static, kubectl, iproute2, curl, jq,
# chromium, prometheus).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: run test lint typecheck unit system-deps proto screenshots clean

$(STAMP): pyproject.toml hack/constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c hack/constraints.txt -e '.[dev]'
	@touch $@

run: $(STAMP)
	$(BIN)/tessera up --demo $(ARGS)

test: $(STAMP) system-deps lint
	$(BIN)/pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

system-deps:
	@bash hack/install-system-deps.sh

# The dashboard's pages as docs/images/dashboard-*.png, taken by its browser test (needs chromium).
screenshots: $(STAMP) system-deps
	TESSERA_SCREENSHOTS=docs/images $(BIN)/pytest -q tests/e2e/test_dashboard.py

proto: $(STAMP)
	hack/gen-proto.sh

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .benchmarks
