# The single entry point: `make help` lists the targets.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM := /usr/bin/chromium

.PHONY: help install lock demo test soak unit integration browser screenshots lint fmt typecheck bench-throughput clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

LOCKS := requirements/tools.txt requirements/dev.txt
# Where torch's CPU wheel comes from: pip's own find-links when set (this machine's local
# wheel), else PyTorch's CPU index. Every other package comes from the package index.
TORCH_LINKS ?= $(or $(PIP_FIND_LINKS),$(shell $(PY) -m pip config get global.find-links 2>/dev/null),https://download.pytorch.org/whl/cpu/torch/)
UV := $(BIN)/uv --quiet
# Bytecode compiled at install, as pip does: with PYTHONDONTWRITEBYTECODE set (as on these
# machines) nothing else would ever write it, and every process would compile lancedb, torch
# and the rest from source at start-up (about 40 s per process under load).
UV_TO_VENV := --python $(BIN)/python --find-links $(TORCH_LINKS)

$(BIN)/uv: requirements/tools.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --require-hashes -r requirements/tools.txt
	touch $@

# Exactly the locked set, hashes checked; the project itself editable on top, no build isolation
# (its build backend is in the lock too).
$(STAMP): $(BIN)/uv $(LOCKS) pyproject.toml
	$(UV) pip sync $(UV_TO_VENV) --require-hashes --compile-bytecode $(LOCKS)
	$(UV) pip install $(UV_TO_VENV) --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install the locked dependency set (hashes checked) and the project

lock: $(BIN)/uv  ## re-resolve every dependency to its newest allowed version (then: make test)
	$(UV) pip compile requirements/tools.in --upgrade --generate-hashes --python-version 3.11 \
		-o requirements/tools.txt
	$(UV) pip compile pyproject.toml requirements/build.in --extra dev --upgrade \
		-c requirements/constraints.in --generate-hashes --python-version 3.11 \
		--find-links $(TORCH_LINKS) -o requirements/dev.txt
	$(UV) pip compile pyproject.toml requirements/build.in --extra rerank -c requirements/dev.txt \
		--generate-hashes --python-version 3.11 --find-links $(TORCH_LINKS) \
		-o requirements/runtime.txt

demo: $(STAMP)  ## start the embedded stack, ingest a sample conversation, ask questions, stop
	$(BIN)/python -m streams.stack.demo

# Two workers, each test file on one of them (its fixtures started once): most integration
# tests wait on brokers and servers, so two halve the suite's time on two cores. Files go
# out in collection order: xdist's own (most tests first) left a file of one long test last.
XDIST := -n 2 --dist loadfile --no-loadscope-reorder

test: $(STAMP) $(CHROMIUM)  ## the test suite (unit and integration), without the soak tests
	$(BIN)/python -m pytest -q $(XDIST) -m 'not soak' --durations=20

# Benchmarks' end-to-end runs, each starting stacks of its own: chaos (kills workers, Redis
# and the broker), scale-out (three processes per stage) and throughput. Kept out of
# `make test`, which stays well inside the CI's time on a shared 2-core machine.
soak: $(STAMP)  ## the soak tests only (about 3 minutes alone)
	$(BIN)/python -m pytest -q $(XDIST) -m soak

unit: $(STAMP)  ## unit tests only
	$(BIN)/python -m pytest -q $(XDIST) -m 'not integration'

integration: $(STAMP) $(CHROMIUM)  ## integration tests only (real broker and Redis on free ports)
	$(BIN)/python -m pytest -q $(XDIST) -m integration

# The console's browser tests drive Debian's chromium (Playwright cannot download browsers
# here); installed once, when missing (apt-get, as root: about 4 minutes with its update).
$(CHROMIUM):
	@command -v apt-get >/dev/null || { echo "install Debian's chromium for the console's browser tests"; exit 1; }
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

browser: $(CHROMIUM)  ## Debian's chromium for the console's browser tests (when missing)

screenshots: $(STAMP) $(CHROMIUM)  ## the README's console screenshots (docs/console-*.png), by the browser tests
	LYCHEE_CONSOLE_SCREENSHOTS=docs $(BIN)/python -m pytest -q \
		tests/streams/gateway/console/test_browser.py -k 'timeline or search'

lint: $(STAMP)  ## ruff lint and format check
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

fmt: $(STAMP)  ## format the code
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

typecheck: $(STAMP)  ## mypy (strict on schemas/, workers/ and lychee_client, checked on streams/)
	$(BIN)/mypy

bench-throughput: $(STAMP)  ## exchanges/s end to end, embedding rate, produce-to-searchable latency
	$(BIN)/lychee bench throughput

clean:  ## remove the virtualenv and local data
	rm -rf $(VENV) data .lychee
