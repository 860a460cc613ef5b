"""`make test-gpu`'s figures collector, and its script's clear stop without a GPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import ROOT

from tools import gpu_figures


def test_quick_figures_write_json_and_markdown(tmp_path, monkeypatch):
    bench = tmp_path / "results.json"
    bench.write_text(json.dumps({"ddp_cpu_speedup_2proc": 1.5, "machine": "x"}))
    monkeypatch.setattr(gpu_figures, "BENCH", bench)
    monkeypatch.setattr(gpu_figures, "NOTEBOOK_REPORT", tmp_path / "missing.json")
    assert gpu_figures.main(["--quick", "--out", str(tmp_path / "out")]) == 0
    fig = json.loads((tmp_path / "out" / "figures.json").read_text())
    assert fig["matmul_tflops"]["cpu float32 n=512"] > 0
    assert fig["bench"]["ddp_cpu_speedup_2proc"] == 1.5
    assert fig["benchmark_report"] is None
    text = (tmp_path / "out" / "figures.md").read_text()
    assert "| ddp_cpu_speedup_2proc | 1.5 |" in text and "| machine |" not in text
    if not torch.cuda.is_available():
        assert fig["speedup_vs_cpu"] == {} and fig["h2d_gbps"] == {}
        assert "not measured: no CUDA GPU" in text


def test_matmul_tflops_counts_two_flops_per_multiply_add(monkeypatch):
    class Fixed:
        median = 2.0

    monkeypatch.setattr(gpu_figures, "benchmark", lambda *a, **k: Fixed)
    assert gpu_figures.matmul_tflops("cpu", 100) == pytest.approx(2 * 100**3 / 2 / 1e12)


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_test_gpu_script_stops_clearly_without_a_gpu(tmp_path):
    env = {**os.environ, "REPORT_DIR": str(tmp_path), "PY": sys.executable}
    env.pop("TEST_GPU_ALLOW_CPU", None)
    run = subprocess.run([str(ROOT / "tools" / "test_gpu.sh")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.startswith("no GPU found")
    assert not any(tmp_path.iterdir()), "nothing may run without a GPU"


# Stands in for the Python that test_gpu.sh runs: every `-c` check passes (torch and
# a GPU "found"), and `-m pytest ...` runs pytest on $CASE alone.
FAKE_PY = """#!/usr/bin/env bash
if [[ $1 == -c ]]; then exit 0; fi
if [[ $1 == -m && $2 == pytest ]]; then exec "$REAL_PY" -m pytest -q "$CASE"; fi
exit 3
"""


@pytest.mark.tooling  # test_gpu.sh with a stand-in Python: no torch
@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs timeout")
@pytest.mark.slow
@pytest.mark.parametrize(("case", "limit", "said"), [
    ("def test_x():\n    pytest.skip('no GPU here')\n", 100,
     "| unit | FAILED: ran nothing (1 skipped) |"),
    ("def test_x():\n    time.sleep(60)\n", 2,
     "| unit | FAILED: timed out after 2 s |"),
])
def test_a_step_that_ran_nothing_or_timed_out_fails_loudly(tmp_path, case, limit, said):
    fake = tmp_path / "python"
    fake.write_text(FAKE_PY)
    fake.chmod(0o755)
    (tmp_path / "test_case.py").write_text("import time\nimport pytest\n\n\n" + case)
    env = {**os.environ, "REPORT_DIR": str(tmp_path / "report"), "PY": str(fake),
           "REAL_PY": sys.executable, "CASE": str(tmp_path / "test_case.py"),
           "STEPS": "unit", "STEP_TIMEOUT": str(limit)}
    run = subprocess.run([str(ROOT / "tools" / "test_gpu.sh")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    report = (tmp_path / "report" / "report.md").read_text()
    assert said in report, report
    assert "make test-gpu FAILED: 1 step(s)" in run.stderr


@pytest.mark.tooling  # make -n: nothing runs
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_gpu_with_the_system_python_installs_nothing():
    run = subprocess.run(["make", "-n", "test-gpu", "PYTHON_ENV=system"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "tools/test_gpu.sh" in run.stdout
    assert "pip install" not in run.stdout and ".venv" not in run.stdout, run.stdout
