# The single entry point: `make help` lists the targets.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help install demo test unit integration lint fmt typecheck bench-throughput clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first and pinned: it is the local CPU wheel; anything unpinned would pull CUDA builds
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install the project with its dev tools

demo: $(STAMP)  ## start the embedded stack, ingest a sample conversation, ask questions, stop
	$(BIN)/python -m streams.stack.demo

test: $(STAMP)  ## run the whole test suite (unit and integration)
	$(BIN)/python -m pytest -q

unit: $(STAMP)  ## unit tests only
	$(BIN)/python -m pytest -q -m 'not integration'

integration: $(STAMP)  ## integration tests only (real broker and Redis on free ports)
	$(BIN)/python -m pytest -q -m integration

lint: $(STAMP)  ## ruff lint and format check
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

fmt: $(STAMP)  ## format the code
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

typecheck: $(STAMP)  ## mypy (strict on schemas/ and workers/, checked on streams/)
	$(BIN)/mypy

bench-throughput: $(STAMP)  ## exchanges/s end to end, embedding rate, produce-to-searchable latency
	$(BIN)/lychee bench throughput

clean:  ## remove the virtualenv and local data
	rm -rf $(VENV) data .lychee
