"""FSDP2 vs DDP on the CPU: 2 processes at 1 thread each, the model of notebook 14.

Runs notebooks/scripts/fsdp_train.py under torchrun (gloo) PAIRS times. Each run
trains the same seeded 4-block MLP (2.1 M parameters, Adam) with FSDP2 and with DDP,
alternating their steps so that background load hits both alike, and reports:
- the bytes each rank stores for parameters, gradients and Adam state (FSDP2 / DDP;
  the ideal with 2 ranks is 0.5);
- the largest weight difference between FSDP2 and one process after the same steps:
  in float64, the notebook's proof of equality, and in float32 for information (Adam
  divides each update by the gradient's running size, so float32 rounding shows);
- the median step time of each (launch, imports and barriers excluded). The script
  alternates FSDP2 and DDP step by step, so each run is one pair whose ratio is the
  median of its side-by-side step ratios; the report gives the median of the runs'
  ratios, with their lowest and highest (bench.pairs).
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

from bench.pairs import (
    PAIRS,
    describe,
    interleave,
    pair_ratios,
    ratio_entry,
    ratio_keys,
    show,
)
from helpers.launch import torchrun

SCRIPT = Path(__file__).resolve().parents[1] / "notebooks/scripts/fsdp_train.py"
TIMED = 10
KEYS = ("fsdp_cpu_param_bytes_ratio", "fsdp_cpu_max_param_diff",
        "fsdp_cpu_max_param_diff_float32", *ratio_keys("fsdp_cpu_step_ratio"),
        "fsdp_cpu_ms_per_step_fsdp", "fsdp_cpu_ms_per_step_ddp", "fsdp_cpu_workload")


def _bytes(memory: dict[str, int]) -> int:
    return sum(memory.values())


def _launch(out: Path) -> dict:
    """Run the script once; return its results for 2 ranks."""
    torchrun(SCRIPT, "--out", out, "--timed", TIMED, "--device", "cpu",
             nproc=2, threads=1, echo=False, timeout=600)
    return json.loads((out / "fsdp_w2.json").read_text())


def run() -> dict[str, float | int | str | list]:
    """Return FSDP2's bytes, weight difference and step time relative to DDP."""
    with tempfile.TemporaryDirectory() as out:
        runs = interleave({"fsdp_train": lambda: _launch(Path(out))})["fsdp_train"]
    f32 = [r["float32"] for r in runs]
    print(show("FSDP2 vs DDP on the CPU, fsdp_train.py: time per step",
               {k: [r[k]["step_s"] for r in f32] for k in ("fsdp", "ddp")}))
    ratios = [statistics.median(pair_ratios(  # the steps that ran side by side
        f["fsdp"]["step_samples"], f["ddp"]["step_samples"])) for f in f32]
    print(describe("FSDP2 / DDP step", ratios))
    last = runs[-1]
    return {
        "fsdp_cpu_param_bytes_ratio": _bytes(last["float32"]["fsdp"]["memory"])
        / _bytes(last["float32"]["ddp"]["memory"]),
        "fsdp_cpu_max_param_diff": max(r["float64"]["fsdp"]["max_diff_single"]
                                       for r in runs),
        "fsdp_cpu_max_param_diff_float32": max(r["fsdp"]["max_diff_single"]
                                               for r in f32),
        **ratio_entry("fsdp_cpu_step_ratio", ratios),
        "fsdp_cpu_ms_per_step_fsdp": statistics.median(1e3 * f["fsdp"]["step_s"]
                                                       for f in f32),
        "fsdp_cpu_ms_per_step_ddp": statistics.median(1e3 * f["ddp"]["step_s"]
                                                      for f in f32),
        "fsdp_cpu_workload": f"{last['params']} parameters, batch 32, Adam, "
                             f"{TIMED} timed steps, {PAIRS} runs",
    }
