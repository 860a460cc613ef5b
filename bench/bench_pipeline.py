"""Pipelined vs naive two-stage ResNet-14 on 2 CPU processes with 1 thread each.

Runs notebooks/scripts/pipe_manual.py, the sweep of notebook 13, with a larger batch:
PAIRS rounds over all split sizes (each round runs them back to back, so drifting
load hits them alike), each size's time in a round a median of 3 steps. The best
pipelined split is the one with the lowest median over rounds; the speed-up is the
median over rounds of that round's naive time over the best split's time, with the
rounds' lowest and highest (bench.pairs), same model and batch. With two balanced
stages and m micro-batches the ideal is 2m/(m+1).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

from bench.pairs import PAIRS, describe, pair_ratios, ratio_entry, ratio_keys, show
from helpers.launch import torchrun

SCRIPT = Path(__file__).resolve().parents[1] / "notebooks/scripts/pipe_manual.py"
BATCH, IMAGE = 128, 64
MICRO_BATCHES = (1, 2, 4, 8)
KEYS = (*ratio_keys("pipeline_cpu_speedup"), "pipeline_cpu_best_split")


def run() -> dict[str, float | int | list]:
    """Return the best pipelined speed-up over the naive split, and its m."""
    splits = ",".join(str(BATCH // m) for m in MICRO_BATCHES)
    if str(SCRIPT.parent) not in sys.path:  # the record's class, as the script has it
        sys.path.insert(0, str(SCRIPT.parent))
    import common
    import pipe_manual

    with tempfile.TemporaryDirectory() as out:
        torchrun(SCRIPT, "--out", out, "--batch", BATCH, "--image", IMAGE,
                 "--splits", splits, "--repeats", 3,
                 "--rounds", PAIRS, nproc=2, threads=1, echo=False, timeout=600)
        sweep = common.load_record(Path(out) / "pipe.json", pipe_manual.Sweep)
    rounds = {BATCH // r.split: r.runs for r in sweep.splits}  # m: per round
    print(show(f"Two-stage pipeline, pipe_manual.py: step time / {BATCH} images",
               {f"{m} micro-batches": [t / BATCH for t in ts]
                for m, ts in rounds.items()}))
    best = min((m for m in MICRO_BATCHES if m > 1),
               key=lambda m: statistics.median(rounds[m]))
    ratios = pair_ratios(rounds[1], rounds[best])
    print(describe(f"naive / {best} micro-batches", ratios))
    return {**ratio_entry("pipeline_cpu_speedup", ratios),
            "pipeline_cpu_best_split": best}
