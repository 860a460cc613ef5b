# The course's commands. Every target that needs Python first makes sure .venv is
# set up; a second run installs nothing (the stamp file tracks the inputs).
SHELL  := /bin/bash
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ARGS   ?=

# Progress bars off, and one thread layout, so `make outputs` and `make test` agree.
export TQDM_DISABLE := 1
export PYTHONHASHSEED := 0
export PYDEVD_DISABLE_FILE_VALIDATION := 1

NOTEBOOKS ?= $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg \
         --nbval-cell-timeout=300

.PHONY: help setup lab test lint unit nbval outputs bench badges html test-browser \
        test-gpu clean

help:
	@echo "make lab      set up, then open the course in JupyterLab (ARGS=... passes options)"
	@echo "make test     set up, then run ruff, unit and hygiene tests, and nbval"
	@echo "make outputs  re-execute every notebook in place (what make test checks)"
	@echo "make bench    run the benchmarks and write bench/results.json"
	@echo "make html     export the executed course to site/"
	@echo "make badges   rewrite Colab badges and setup cells from pyproject.toml"
	@echo "make test-browser  open notebook 01 in JupyterLab in headless Chromium"
	@echo "make test-gpu      the whole suite plus GPU figures, on an NVIDIA GPU machine"
	@echo "Pick notebooks with NOTEBOOKS=notebooks/01_cuda_queries.ipynb (outputs, nbval)"

setup: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python requirements.txt pyproject.toml
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.txt \
	    2> >(grep -v "^WARNING: Location" >&2)
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

# JupyterLab refuses to run as root unless told; containers and CI often are root.
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(LAB_ROOT) $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

unit: $(STAMP)
	$(BIN)/pytest tests --ignore=tests/browser --durations=0

nbval: $(STAMP)
	$(BIN)/pytest $(NBVAL) $(NOTEBOOKS) --durations=0

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest tests --ignore=tests/browser $(NOTEBOOKS) $(NBVAL) --durations=0

outputs: $(STAMP)
	cd notebooks && for nb in $(notdir $(NOTEBOOKS)); do \
	    echo "executing $$nb"; \
	    ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	        --ExecutePreprocessor.timeout=300 --ExecutePreprocessor.record_timing=False \
	        "$$nb" || exit 1; \
	done

bench: $(STAMP)
	$(BIN)/python -m bench.run $(ARGS)

badges: $(STAMP)
	$(BIN)/python -m tools.notebook_conventions

# The static site: every notebook as stored (nothing re-executed), for offline reading.
html: $(STAMP)
	$(BIN)/python -m tools.build_site --out site $(NOTEBOOKS)

# The browser test needs Debian's chromium + chromium-driver (apt; .ci/run installs
# them) and selenium in .venv (installed here, once).
BROWSER_STAMP := $(VENV)/.installed-browser

$(BROWSER_STAMP): $(STAMP) requirements-browser.txt
	$(BIN)/python -m pip install -q --disable-pip-version-check \
	    -r requirements-browser.txt 2> >(grep -v "^WARNING: Location" >&2)
	touch $@

test-browser: $(BROWSER_STAMP)
	$(BIN)/pytest tests/browser --durations=0

# On a machine with NVIDIA GPUs: ruff, unit tests, every notebook (nbval-lax), make
# bench, and the headline figures, into reports/test_gpu/. See tools/test_gpu.sh.
test-gpu: $(STAMP)
	NOTEBOOKS="$(NOTEBOOKS)" tools/test_gpu.sh

clean:
	rm -rf $(VENV) site reports bench/results.json
