# The README's two commands: `make demo` and `make test`.  Both create the environment first
# when it is missing, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install test test-fast demo bench lint notebooks clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

install: $(STAMP)

# Test processes (pytest-xdist): one per core, at most 4.  Each test file runs whole in one
# process (--dist loadfile: module fixtures such as the Dask cluster are made once; the mx
# files, and the dfp files, are one unit each, tests/conftest.py: they share kernels no
# precompile group compiles), and the processes share Numba's on-disk cache, so a kernel
# compiled in one is loaded by the others.
# Numba's cold compilation is most of a fresh clone's test time and runs on one core: two
# processes on a 2-core host took a clean clone's pytest from 16:25 to 10:40-12:30
# (2026-11-28).  --no-loadscope-reorder keeps the collection's order, in which
# tests/conftest.py puts the long exhaustive files first.  XDIST= runs everything in one process.
XDIST ?= -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder

## Every test, the exhaustive 2^32 conversions (marked slow) included.  The most used kernels
## are compiled first, one process per core (softfloat/precompile.py): the two test processes
## otherwise compile them both at once.
test: $(STAMP)
	$(BIN)/python -m softfloat.precompile
	$(BIN)/python -m pytest -q $(XDIST)

## Everything except the tests marked slow.
test-fast: $(STAMP)
	$(BIN)/python -m softfloat.precompile
	$(BIN)/python -m pytest -q $(XDIST) -m "not slow"

## The main job on built-in data: reproduce the paper's findings at small scale.
demo: $(STAMP)
	$(BIN)/python -m models reproduce --quick --out results/demo

## Speed ratios against baselines run in the same process.
bench: $(STAMP)
	$(BIN)/python -m bench

lint: $(STAMP)
	$(BIN)/ruff check .

notebooks: $(STAMP)
	$(BIN)/python -m tests.run_notebooks

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis results
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
