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

import statistics
import sys
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


def _launch(out: Path):
    """Run the script once; return its record for 2 ranks (a fsdp_train.Compared)."""
    if str(SCRIPT.parent) not in sys.path:  # the record's class, as the script has it
        sys.path.insert(0, str(SCRIPT.parent))
    import common
    import fsdp_train

    torchrun(SCRIPT, "--out", out, "--timed", TIMED, "--device", "cpu",
             nproc=2, threads=1, echo=False, timeout=600)
    return common.load_record(out / "fsdp_w2.json", fsdp_train.Compared)


def run() -> dict[str, float | int | str | list]:
    """Return FSDP2's bytes, weight difference and step time relative to DDP."""
    with tempfile.TemporaryDirectory() as out:
        runs = interleave({"fsdp_train": lambda: _launch(Path(out))})["fsdp_train"]
    print(show("FSDP2 vs DDP on the CPU, fsdp_train.py: time per step",
               {k: [statistics.median(r.step_s[k]) for r in runs]
                for k in ("fsdp", "ddp")}))
    ratios = [statistics.median(pair_ratios(  # the steps that ran side by side
        r.step_s["fsdp"], r.step_s["ddp"])) for r in runs]
    print(describe("FSDP2 / DDP step", ratios))
    last = runs[-1]
    return {
        "fsdp_cpu_param_bytes_ratio": _bytes(last.memory["fsdp"])
        / _bytes(last.memory["ddp"]),
        "fsdp_cpu_max_param_diff": max(r.max_diff_single for r in runs),
        "fsdp_cpu_max_param_diff_float32": max(r.max_diff_single_f32 for r in runs),
        **ratio_entry("fsdp_cpu_step_ratio", ratios),
        "fsdp_cpu_ms_per_step_fsdp": statistics.median(
            1e3 * statistics.median(r.step_s["fsdp"]) for r in runs),
        "fsdp_cpu_ms_per_step_ddp": statistics.median(
            1e3 * statistics.median(r.step_s["ddp"]) for r in runs),
        "fsdp_cpu_workload": f"{last.params} parameters, batch 32, Adam, "
                             f"{TIMED} timed steps, {PAIRS} runs",
    }
