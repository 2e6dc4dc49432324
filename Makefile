# Two entry points: `make demo` and `make test` (ruff, then pytest, which checks the import layers too).
# Both create .venv when it is missing. The suite runs in two worker processes (pytest-xdist), a file's tests
# in one worker so that its module fixtures are built once, the heaviest files first (--no-loadscope-reorder keeps
# the order tests/conftest.py sets); each worker runs torch on one thread (tests/conftest.py).
# torch is pinned to 2.13.0 *before* anything that depends on it: on the project's
# machines that version is a local CPU build, any other spec pulls gigabytes of CUDA wheels.
# Elsewhere, override it: `make test TORCH_SPEC=torch`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.isotropy-installed

.PHONY: demo test lint install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/isotropy demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

test: lint
	$(BIN)/python -m pytest -q --durations=25 -n 2 --dist loadfile --no-loadscope-reorder

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
