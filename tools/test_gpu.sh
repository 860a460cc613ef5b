#!/usr/bin/env bash
# The whole suite on a machine with NVIDIA GPUs (`make test-gpu`), plus its figures.
#
# Steps: ruff; the unit and hygiene tests (tests that need CUDA run here instead of
# skipping); every notebook under nbval --nbval-lax; the benchmarks (`make bench`'s
# bench.run); then tools/gpu_figures.py (matmul TFLOP/s, pageable vs pinned
# bandwidth, 1-GPU vs CPU speedups, merged with bench/results.json and the benchmark
# report notebook's JSON). Each step's log, figures.json/.md and the one report,
# report.md (figures, then which steps passed), go to $REPORT_DIR (default
# reports/test_gpu/). Every step runs even if an earlier one failed; the script exits
# non-zero if any failed.
#
# Without a CUDA GPU it prints "no GPU found" and exits with status 2, running
# nothing: `make test` is the CPU suite. TEST_GPU_ALLOW_CPU=1 runs the same steps on
# the CPU anyway (to try this script out; the figures then hold the CPU side only).
# STEPS="ruff unit nbval bench figures" picks steps; NOTEBOOKS picks notebooks.
#
# PY is the Python that runs everything (default .venv/bin/python; `make test-gpu
# PYTHON_ENV=system` passes the current python3, where PyTorch is already installed,
# as on Colab or a cluster module). The script installs nothing: it runs each tool as
# `$PY -m ...`, finds `helpers` through PYTHONPATH, and a step whose tool is missing
# from that Python says so (ruff is then skipped; pytest and nbval fail). On a
# torch-only Python (no Jupyter, nbval or ruff) the unit tests that need those skip,
# saying why (-rs lists each reason in unit.log), and the rest run. Launches stop their
# processes with psutil: on a torch-only Python, pip install psutil first.
#
# A step fails loudly, in its row of the report and in the exit status, if it exits
# non-zero, runs past STEP_TIMEOUT seconds (default 3600; needs `timeout`), or is a
# pytest step that ran nothing (exit 5, "no tests ran", or nothing passed). A pytest
# step's row gives its counts (passed, failed, skipped).
set -uo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
REPORT_DIR=${REPORT_DIR:-reports/test_gpu}
STEPS=${STEPS:-ruff unit nbval bench figures}
STEP_TIMEOUT=${STEP_TIMEOUT:-3600}
NOTEBOOKS=${NOTEBOOKS:-$(ls notebooks/[0-9][0-9]_*.ipynb)}
export TQDM_DISABLE=1 PYTHONHASHSEED=0 PYDEVD_DISABLE_FILE_VALIDATION=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # helpers, even if not installed

if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "no PyTorch in $PY: make test-gpu runs in .venv (plain make test-gpu)," >&2
    echo "or in a Python that has torch (PYTHON_ENV=system, or PY=/path/to/python)." >&2
    exit 1
fi
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
then
    if [[ "${TEST_GPU_ALLOW_CPU:-0}" != 1 ]]; then
        echo "no GPU found: torch.cuda.is_available() is False on this machine." >&2
        echo "make test-gpu needs an NVIDIA GPU; run 'make test' for the CPU suite," >&2
        echo "or TEST_GPU_ALLOW_CPU=1 make test-gpu to run these steps on the CPU." >&2
        exit 2
    fi
    echo "no GPU found: TEST_GPU_ALLOW_CPU=1, so running every step on the CPU."
fi

mkdir -p "$REPORT_DIR"
rm -f "$REPORT_DIR"/*.log "$REPORT_DIR"/figures.* "$REPORT_DIR/report.md"
SUMMARY=$(mktemp)
trap 'rm -f "$SUMMARY"' EXIT
failed=0

missing() {  # missing WHY: a step that cannot run; it fails with WHY
    echo "$1"
    return 1
}

has() {  # has MODULE: can $PY import it?
    "$PY" -c "import $1" 2>/dev/null
}

skip() {  # skip NAME WHY: record a step that could not run here
    [[ " $STEPS " == *" $1 "* ]] || return 0
    echo "| $1 | skipped: $2 | 0 s | |" >>"$SUMMARY"
    echo "== $1: skipped: $2"
}

limit() {  # limit COMMAND...: interrupt it after STEP_TIMEOUT s (as Ctrl-C would)
    if command -v timeout >/dev/null; then
        timeout --foreground --signal=INT --kill-after=60 "$STEP_TIMEOUT" "$@"
    else
        "$@"
    fi
}

step() {  # step NAME COMMAND...: run it, log it, record pass/fail and seconds
    local name=$1 start=$SECONDS rc counts=""
    shift
    [[ " $STEPS " == *" $name "* ]] || return 0
    echo "== $name: $*"
    limit "$@" 2>&1 | tee "$REPORT_DIR/$name.log"
    rc=${PIPESTATUS[0]}
    local result=passed
    if [[ " $* " == *" pytest "* ]]; then  # pytest's last line: "3 passed, 1 skipped"
        counts=$(grep -E '^(=+ )?[0-9]+ [a-z]+.* in [0-9.]+s' "$REPORT_DIR/$name.log" |
            tail -n 1 | sed -E 's/^=+ | in [0-9.]+s.*$//g')
        if [[ $rc == 0 && ! $counts =~ [0-9]+\ passed ]]; then rc=5; fi
    fi
    if [[ $rc == 124 || $rc == 137 ]]; then
        result="FAILED: timed out after $STEP_TIMEOUT s"
    elif [[ $rc == 5 ]] || tail -n 2 "$REPORT_DIR/$name.log" | grep -q "no tests ran"
    then
        result="FAILED: ran nothing" counts=${counts:-no tests collected}
    elif [[ $rc != 0 ]]; then
        result="FAILED (exit $rc)"
    fi
    [[ $result == passed ]] || failed=1
    echo "| $name | $result${counts:+ ($counts)} | $((SECONDS - start)) s | \`$*\` |" \
        >>"$SUMMARY"
    echo "== $name: $result${counts:+ ($counts)}"
}

if has ruff; then
    step ruff "$PY" -m ruff check .
else
    skip ruff "no ruff in $PY (pip install ruff to lint)"
fi
step unit "$PY" -m pytest tests --ignore=tests/browser --durations=0 -rs
# Lax, not strict: the stored outputs were made on a CPU, and on a GPU many of them
# rightly differ beyond what tests/sanitize.cfg normalises (try_gpu no longer says
# it fell back, real device properties and memory are printed, and raises-exception
# cells written for a missing driver no longer raise). Lax mode still runs every
# cell, so a crash or a failing assert fails the step; it just compares no outputs.
if has nbval; then
    # shellcheck disable=SC2086
    step nbval "$PY" -m pytest --nbval-lax --nbval-current-env \
        --nbval-cell-timeout=300 --durations=0 $NOTEBOOKS
else  # a failure, not a skip: the notebooks are what this check is for
    step nbval missing "no nbval in $PY: pip install nbval, then run this again"
fi
step bench "$PY" -m bench.run
step figures "$PY" -m tools.gpu_figures --out "$REPORT_DIR"

{
    [[ -f "$REPORT_DIR/figures.md" ]] && cat "$REPORT_DIR/figures.md" && echo
    echo "## Steps"
    echo
    echo "| step | result | time | command |"
    echo "|---|---|---|---|"
    cat "$SUMMARY"
} >"$REPORT_DIR/report.md"
echo
sed -n '/^## Steps/,$p' "$REPORT_DIR/report.md"
echo "report: $REPORT_DIR/report.md"
if [[ $failed != 0 ]]; then
    echo "make test-gpu FAILED: $(grep -c '| FAILED' "$SUMMARY") step(s); see above." >&2
fi
exit $failed
