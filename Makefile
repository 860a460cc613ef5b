# The course's commands. Every target that needs Python first makes sure .venv is
# set up; a second run installs nothing (the stamp file tracks the inputs).
SHELL  := /bin/bash
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ARGS   ?=
# --no-compile: Python compiles each module when it is first imported, so installing
# skips byte-compiling all of torch (about 40 s of CPU per environment).
PIP_FLAGS := -q --disable-pip-version-check --no-compile
# ... and then keeps what it compiled: where the shell sets PYTHONDONTWRITEBYTECODE,
# every process the tests start (kernels, ranks, children) would compile torch's
# modules again, about 2 s of CPU each.
unexport PYTHONDONTWRITEBYTECODE

# Progress bars off and a fixed hash seed, so `make outputs` and `make test` agree.
# Only for the targets that execute notebooks: `make lab` keeps its tqdm bars.
QUIET_TARGETS := test nbval outputs test-compat test-gpu
$(QUIET_TARGETS): export TQDM_DISABLE := 1
$(QUIET_TARGETS): export PYTHONHASHSEED := 0
$(QUIET_TARGETS): export PYDEVD_DISABLE_FILE_VALIDATION := 1

NOTEBOOKS ?= $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
# How every lane runs notebooks; strict nbval adds the stored-output comparison.
NB_RUN := --nbval-current-env --nbval-cell-timeout=300
NBVAL  := --nbval $(NB_RUN) --nbval-sanitize-with tests/sanitize.cfg
# make test, make unit and make test-compat run two test files or notebooks at a time
# (pytest-xdist; --dist loadfile keeps each notebook's cells in order in one kernel):
# much of a serial run waits on process start-ups, so two at a time take about half
# the wall time on 2 cores. JOBS=0 runs serially, in this process, as `make nbval`
# does; the README's per-notebook times come from such a run.
JOBS   ?= 2
XDIST  := $(if $(filter 0,$(JOBS)),,-n $(JOBS) --dist loadfile)

.PHONY: help setup lab test lint unit nbval outputs bench badges html test-browser \
        release grade \
        test-gpu setup-compat test-compat setup-floor test-floor clean

help:
	@echo "make lab      set up, then open the course in JupyterLab (ARGS=... passes options)"
	@echo "make test     set up, then run ruff, unit and hygiene tests, and nbval"
	@echo "              (two at a time; JOBS=0 runs them one by one)"
	@echo "make unit     the fast loop: every test that starts no process (under a minute)"
	@echo "make outputs  re-execute every notebook in place (what make test checks)"
	@echo "make release  the student release without solutions (nbgrader): build/teach/"
	@echo "make grade SUBMISSIONS=dir  autograde dir/<student>/NN_x.ipynb (COURSE=dir: a hub's)"
	@echo "                   -> build/teach/gradebook.csv"
	@echo "make bench    run the benchmarks and write bench/results.json"
	@echo "make html     export the executed course to site/"
	@echo "make badges   rewrite Colab badges and setup cells from pyproject.toml"
	@echo "make test-browser  open, save and close every notebook in JupyterLab"
	@echo "                   (headless Chromium): each must stay byte-identical"
	@echo "make test-gpu      the whole suite plus GPU figures, on an NVIDIA GPU machine"
	@echo "                   (PYTHON_ENV=system: use the current Python, install nothing)"
	@echo "make test-compat   unit tests and every notebook (nbval-lax) on Colab's pair:"
	@echo "                   Python 3.13 and torch 2.11, in .venv-compat"
	@echo "make test-floor    unit tests on the floor: Python 3.10, the pinned torch and"
	@echo "                   no Jupyter stack (as on a GPU box with torch preinstalled)"
	@echo "Pick notebooks with NOTEBOOKS=notebooks/01_cuda_queries.ipynb (outputs, nbval)"

setup: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python requirements.txt pyproject.toml
	$(BIN)/python -m pip install $(PIP_FLAGS) -r requirements.txt \
	    2> >(grep -v "^WARNING: Location" >&2)
	$(BIN)/python -m pip install $(PIP_FLAGS) --no-deps -e .
	touch $@

# The teacher's kit (TEACHING.md): nbgrader, installed into .venv once, on top.
TEACH_STAMP := $(VENV)/.installed-teach
SUBMISSIONS ?=
COURSE      ?=
TIMEOUT     ?= 600

$(TEACH_STAMP): $(STAMP) requirements-teach.txt
	$(BIN)/python -m pip install $(PIP_FLAGS) -r requirements-teach.txt \
	    2> >(grep -v "^WARNING: Location" >&2)
	touch $@

release: $(TEACH_STAMP)
	$(BIN)/python -m tools.teach release $(if $(COURSE),--course "$(COURSE)") $(NOTEBOOKS)

grade: $(TEACH_STAMP)
	@[[ -n "$(SUBMISSIONS)$(COURSE)" ]] || { echo "make grade needs SUBMISSIONS=folder:" \
	    "one folder per student, holding their NN_name.ipynb files" \
	    "(or COURSE=an nbgrader course folder)" >&2; exit 2; }
	$(BIN)/python -m tools.teach grade $(if $(SUBMISSIONS),"$(SUBMISSIONS)") \
	    $(if $(COURSE),--course "$(COURSE)") \
	    --timeout $(TIMEOUT)

# Colab's pair, the oldest the course supports: Python 3.13 and the torch Colab ships
# (requirements-compat.txt), in a second venv. Everything else as in requirements.txt.
COMPAT_VENV   := .venv-compat
COMPAT_BIN    := $(COMPAT_VENV)/bin
COMPAT_STAMP  := $(COMPAT_VENV)/.installed
COMPAT_PYTHON ?= $(firstword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.13*/bin/python3) \
                             $(shell command -v python3.13 2>/dev/null))
# requirements.txt without its torch/torchvision lines (their versions come from
# requirements-compat.txt).
NOT_TORCH := sed -E '/^(torch|torchvision)([<>=!~ ;[]|$$)/d' requirements.txt

$(COMPAT_BIN)/python:
	@[[ -n "$(COMPAT_PYTHON)" ]] || { echo "make test-compat needs Python 3.13:" \
	    "pyenv install 3.13, or COMPAT_PYTHON=/path/to/python3.13" >&2; exit 1; }
	$(COMPAT_PYTHON) -m venv $(COMPAT_VENV)

$(COMPAT_STAMP): $(COMPAT_BIN)/python requirements.txt requirements-compat.txt pyproject.toml
	$(COMPAT_BIN)/python -m pip install $(PIP_FLAGS) \
	    -r requirements-compat.txt -r <($(NOT_TORCH)) \
	    2> >(grep -v "^WARNING: Location" >&2)
	$(COMPAT_BIN)/python -m pip install $(PIP_FLAGS) --no-deps -e .
	touch $@

setup-compat: $(COMPAT_STAMP)

# Every notebook under nbval-lax: each cell runs and every assert is live; outputs
# are not compared (they differ between versions). With them, the fast unit tests.
# Left to make test, to save CI time: tests marked `tooling` (pyproject.toml: no torch
# code whose version matters), tests marked `slow` (they launch the scripts, which the
# notebooks launch here too), and the plugin's wrong answers and load runs
# (COURSE_EXTRAS=none: they test the checks and the machine, not torch).
test-compat: export COURSE_EXTRAS := none
test-compat: $(COMPAT_STAMP)
	@$(COMPAT_BIN)/python -c "import sys, torch; print('compat lane: Python', \
	    sys.version.split()[0], '· torch', torch.__version__)"
	$(COMPAT_BIN)/pytest tests --ignore=tests/browser -m "not tooling and not slow" \
	    $(NOTEBOOKS) --nbval-lax $(NB_RUN) $(XDIST) --durations=0

# The stated floor, Python 3.10 with the pinned torch, on a torch-only interpreter:
# torch, torchvision, scikit-learn, matplotlib, tqdm, psutil and pytest from
# requirements.txt, and no Jupyter, nbval or ruff (how a GPU box with a preinstalled
# torch runs the tests). Every file compiles under 3.10, and the fast unit tests run
# (not `slow`: make test launches the scripts); those that need the Jupyter stack
# skip, saying why.
FLOOR_VENV   := .venv-floor
FLOOR_BIN    := $(FLOOR_VENV)/bin
FLOOR_STAMP  := $(FLOOR_VENV)/.installed
FLOOR_PYTHON ?= $(firstword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.10*/bin/python3) \
                            $(shell command -v python3.10 2>/dev/null))
TORCH_ONLY := grep -E '^(torch|torchvision|scikit-learn|matplotlib|tqdm|psutil|pytest)([<>=!~ ;[]|$$)' \
              requirements.txt

$(FLOOR_BIN)/python:
	@[[ -n "$(FLOOR_PYTHON)" ]] || { echo "make test-floor needs Python 3.10:" \
	    "pyenv install 3.10, or FLOOR_PYTHON=/path/to/python3.10" >&2; exit 1; }
	$(FLOOR_PYTHON) -m venv $(FLOOR_VENV)

$(FLOOR_STAMP): $(FLOOR_BIN)/python requirements.txt
	$(FLOOR_BIN)/python -m pip install $(PIP_FLAGS) -r <($(TORCH_ONLY)) \
	    2> >(grep -v "^WARNING: Location" >&2)
	touch $@

setup-floor: $(FLOOR_STAMP)

test-floor: export TQDM_DISABLE := 1
test-floor: export PYTHONHASHSEED := 0
test-floor: $(FLOOR_STAMP)
	@$(FLOOR_BIN)/python -c "import sys, torch; print('floor lane: Python', \
	    sys.version.split()[0], '· torch', torch.__version__, '· no Jupyter stack')"
	$(FLOOR_BIN)/python -m compileall -q -x '/\.venv' helpers notebooks/scripts tests bench tools
	PYTHONPATH=$(CURDIR) $(FLOOR_BIN)/pytest tests --ignore=tests/browser -m "not slow" \
	    -rs --durations=10

# JupyterLab refuses to run as root unless told; containers and CI often are root.
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(LAB_ROOT) $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

# The fast loop: every test that starts no process (marked `slow` otherwise), two
# test files at a time as make test runs them.
unit: $(STAMP) $(TEACH_STAMP)
	$(BIN)/pytest tests --ignore=tests/browser -m "not slow" -p no:nbval $(XDIST) --durations=10

nbval: $(STAMP)
	$(BIN)/pytest $(NBVAL) $(NOTEBOOKS) --durations=0

test: $(STAMP) $(TEACH_STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest tests --ignore=tests/browser $(NOTEBOOKS) $(NBVAL) $(XDIST) --durations=0

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

# The static site for offline reading: Sphinx with myst-nb renders every notebook as
# stored (nothing re-executed), with search and navigation; settings in tools/html/.
html: $(STAMP)
	$(BIN)/python -m tools.build_site --out site $(NOTEBOOKS)

# The browser test needs Debian's chromium + chromium-driver (apt; .ci/run installs
# them) and selenium in .venv (installed here, once).
BROWSER_STAMP := $(VENV)/.installed-browser

$(BROWSER_STAMP): $(STAMP) requirements-browser.txt
	$(BIN)/python -m pip install $(PIP_FLAGS) \
	    -r requirements-browser.txt 2> >(grep -v "^WARNING: Location" >&2)
	touch $@

test-browser: $(BROWSER_STAMP)
	$(BIN)/pytest tests/browser --durations=0

# On a machine with NVIDIA GPUs: ruff, unit tests, every notebook (nbval-lax), make
# bench, and the headline figures, into reports/test_gpu/. See tools/test_gpu.sh.
# PYTHON_ENV=system runs it with $(PYTHON) as it is, where PyTorch is already
# installed (Colab, a cluster module, a GPU box with no registry): no .venv, no pip.
PYTHON_ENV ?= venv
ifeq ($(PYTHON_ENV),system)
test-gpu:
	NOTEBOOKS="$(NOTEBOOKS)" PY="$(PYTHON)" tools/test_gpu.sh
else ifeq ($(PYTHON_ENV),venv)
test-gpu: $(STAMP)
	NOTEBOOKS="$(NOTEBOOKS)" PY="$(BIN)/python" tools/test_gpu.sh
else
test-gpu:
	@echo "PYTHON_ENV is '$(PYTHON_ENV)': use venv (the default) or system" >&2; exit 2
endif

clean:
	rm -rf $(VENV) $(COMPAT_VENV) $(FLOOR_VENV) site reports bench/results.json
