"""Pipelined vs naive two-stage ResNet-14 on 2 CPU processes with 1 thread each.

Runs notebooks/scripts/pipe_manual.py, the sweep of notebook 11, with a larger batch:
3 rounds over all split sizes (interleaved, so drifting load hits them alike), each a
median of 3 steps; a split size's time is the median of its rounds. The speed-up is
the naive split's time over the best pipelined one, same model and batch. With two
balanced stages and m micro-batches the ideal is 2m/(m+1).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from helpers.launch import torchrun

SCRIPT = Path(__file__).resolve().parents[1] / "notebooks/scripts/pipe_manual.py"
BATCH, IMAGE, ROUNDS = 128, 64, 3
MICRO_BATCHES = (1, 2, 4, 8)


def run() -> dict[str, float | int]:
    """Return the best pipelined speed-up over the naive split, and its m."""
    splits = ",".join(str(BATCH // m) for m in MICRO_BATCHES)
    with tempfile.TemporaryDirectory() as out:
        torchrun(SCRIPT, "--out", out, "--batch", BATCH, "--image", IMAGE,
                 "--splits", splits, "--repeats", 3,
                 "--rounds", ROUNDS, nproc=2, threads=1, echo=False, timeout=600)
        result = json.loads((Path(out) / "pipe.json").read_text())
    times = {BATCH // int(s): r["median"] for s, r in result.items()}
    best = min((m for m in MICRO_BATCHES if m > 1), key=times.get)
    for m, t in times.items():
        print(f"   {m} micro-batches of {BATCH // m:3d}: {t * 1e3:4.0f} ms per step")
    return {"pipeline_cpu_speedup": round(times[1] / times[best], 3),
            "pipeline_cpu_best_split": best}
