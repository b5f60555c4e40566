# Two commands for a fresh machine:  `make demo`  and  `make test`.
# Both create the virtual environment in .venv on first use (about 2 minutes).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)

.PHONY: setup demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: setup
	$(VENV)/bin/gangway run pipelines/train_eval_infer.py --state-dir .gangway/demo

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Two workers: the suite is mostly subprocesses (steps, torchrun gangs, servers) that leave a
# core idle while one test waits. Tests that read the shared reference runs go to one worker.
TEST_WORKERS ?= 2

test: lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

bench: setup
	$(PY) -m pytest -m benchmark -s

clean:
	rm -rf $(VENV) .gangway .mypy_cache .ruff_cache .pytest_cache
