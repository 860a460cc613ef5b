"""FSDP2 vs DDP on the CPU: 2 processes at 1 thread each, the model of notebook 12.

Runs notebooks/scripts/fsdp_train.py under torchrun (gloo) REPEATS times. Each run
trains the same seeded 4-block MLP (2.1 M parameters, Adam) with FSDP2 and with DDP,
alternating their steps so that background load hits both alike, and reports:
- the bytes each rank stores for parameters, gradients and Adam state (FSDP2 / DDP;
  the ideal with 2 ranks is 0.5);
- the largest weight difference between FSDP2 and one process after the same steps:
  in float64, the notebook's proof of equality, and in float32 for information (Adam
  divides each update by the gradient's running size, so float32 rounding shows);
- the median step time of each (launch, imports and barriers excluded). The script
  alternates FSDP2 and DDP step by step, so each run's ratio is the median of its
  side-by-side step ratios; the report gives the median over runs and their spread.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

from helpers.launch import torchrun

SCRIPT = Path(__file__).resolve().parents[1] / "notebooks/scripts/fsdp_train.py"
REPEATS, TIMED = 3, 10


def _bytes(memory: dict[str, int]) -> int:
    return sum(memory.values())


def run() -> dict[str, float | int | str]:
    """Return FSDP2's bytes, weight difference and step time relative to DDP."""
    runs = []
    with tempfile.TemporaryDirectory() as out:
        for _ in range(REPEATS):
            torchrun(SCRIPT, "--out", out, "--timed", TIMED, "--device", "cpu",
                     nproc=2, threads=1, echo=False, timeout=600)
            runs.append(json.loads((Path(out) / "fsdp_w2.json").read_text()))
    f32 = [r["float32"] for r in runs]
    ms = {k: [1e3 * r[k]["step_s"] for r in f32] for k in ("fsdp", "ddp")}
    for name, values in ms.items():
        print(f"   {name:5s} ms/step: " + ", ".join(f"{v:.1f}" for v in values))
    ratios = [statistics.median(  # steps that ran side by side, in each run
        a / b for a, b in zip(f["fsdp"]["step_samples"], f["ddp"]["step_samples"],
                              strict=True)) for f in f32]
    last = runs[-1]
    return {
        "fsdp_cpu_param_bytes_ratio": _bytes(last["float32"]["fsdp"]["memory"])
        / _bytes(last["float32"]["ddp"]["memory"]),
        "fsdp_cpu_max_param_diff": max(r["float64"]["fsdp"]["max_diff_single"]
                                       for r in runs),
        "fsdp_cpu_max_param_diff_float32": max(r["fsdp"]["max_diff_single"]
                                               for r in f32),
        "fsdp_cpu_step_ratio": statistics.median(ratios),
        "fsdp_cpu_step_ratio_spread": f"{min(ratios):.2f}-{max(ratios):.2f}",
        "fsdp_cpu_ms_per_step_fsdp": statistics.median(ms["fsdp"]),
        "fsdp_cpu_ms_per_step_ddp": statistics.median(ms["ddp"]),
        "fsdp_cpu_workload": f"{last['params']} parameters, batch 32, Adam, "
                             f"{TIMED} timed steps, {REPEATS} runs",
    }
