"""DDP on the CPU: 1 process vs 2 processes at 1 thread each, on a compute-bound CNN.

Runs notebooks/scripts/ddp_train.py under torchrun (gloo), the same global batch and
steps each time, and reads the median time per training step that the script
measures after its warm-up steps (launch, import time, checkpoints and barriers
excluded). The configurations run side by side in each of PAIRS rounds, the order
reversed every other round (bench.pairs.interleave), so that background load hits
them alike; each ratio is the median of the rounds' ratios, with their lowest and
highest.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from functools import partial
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

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "notebooks" / "scripts" / "ddp_train.py"
# 16x16 images through a 32/64/64-channel CNN: about 5.5 GFLOP per step of 64 images
# for 56,772 weights (222 KiB to all-reduce), so compute dwarfs communication, and
# the activations of one rank's 32 images stay in its core's L2 cache. Measured while
# tuning: 32x32 images with 16 channels (bigger activations) gave ~1.5x, and smaller
# DDP buckets (--bucket-cap-mb 0.05, more overlap) were slower than one bucket.
WORK = ["--samples", "1920", "--batch-size", "64", "--image-size", "16",
        "--width", "32", "--epochs", "1", "--device", "cpu", "--seed", "0"]
CONFIGS = {"1proc": (1, 1), "2proc": (2, 1), "1proc_2threads": (1, 2)}
KEYS = (*ratio_keys("ddp_cpu_speedup_2proc"),
        *ratio_keys("ddp_cpu_speedup_1proc_2threads"),
        "ddp_cpu_ms_per_step_1proc", "ddp_cpu_ms_per_step_2proc",
        "ddp_cpu_allreduce_ms", "ddp_cpu_max_param_diff", "ddp_cpu_workload")


def _train(nproc: int, threads: int, out: Path):
    """Run the script once; return its Report record (weights, timing)."""
    if str(SCRIPT.parent) not in sys.path:  # the record's class, as the script has it
        sys.path.insert(0, str(SCRIPT.parent))
    import common
    import ddp_parts

    dump = out / f"{nproc}x{threads}.pt"
    torchrun(SCRIPT, *WORK, "--dump", dump, "--checkpoint", out / "ckpt.pt",
             nproc=nproc, threads=threads, echo=False, timeout=300)
    return common.load_record(dump, ddp_parts.Report)


def run() -> dict[str, float | int | str | list]:
    """Measure the 2-process speedup and the weight difference against 1 process."""
    with tempfile.TemporaryDirectory() as tmp:
        runs = interleave({name: partial(_train, *cfg, Path(tmp))
                           for name, cfg in CONFIGS.items()})
    ms = {name: [r.median_ms for r in rs] for name, rs in runs.items()}
    print(show("DDP on the CPU, ddp_train.py: time per step", {n: [v / 1e3 for v in vs]
                                                for n, vs in ms.items()},
               {name: threads for name, (_, threads) in CONFIGS.items()}))
    ddp = pair_ratios(ms["1proc"], ms["2proc"])
    threads = pair_ratios(ms["1proc"], ms["1proc_2threads"])
    print(describe("1proc / 2proc", ddp))
    print(describe("1proc / 1proc_2threads", threads))
    return {
        **ratio_entry("ddp_cpu_speedup_2proc", ddp),
        **ratio_entry("ddp_cpu_speedup_1proc_2threads", threads),
        "ddp_cpu_ms_per_step_1proc": statistics.median(ms["1proc"]),
        "ddp_cpu_ms_per_step_2proc": statistics.median(ms["2proc"]),
        "ddp_cpu_allreduce_ms": statistics.median(r.allreduce_ms
                                                  for r in runs["2proc"]),
        "ddp_cpu_max_param_diff": max(  # rank 0's weights, in every pair
            (two.params[0] - one.params[0]).abs().max().item()
            for one, two in zip(runs["1proc"], runs["2proc"], strict=True)),
        "ddp_cpu_workload": " ".join(WORK[:-4]) + f", {PAIRS} rounds",
    }
