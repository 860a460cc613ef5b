"""DDP on the CPU: 1 process vs 2 processes at 1 thread each, on a compute-bound CNN.

Runs notebooks/scripts/ddp_train.py under torchrun (gloo), the same global batch and
steps each time, and reads the median time per training step that the script
measures after its warm-up steps (launch, import time, checkpoints and barriers
excluded). The configurations run back to back in each of REPEATS rounds, so that
background load hits them alike; each ratio is the median over rounds of that round's
ratio, reported with the rounds' spread.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import torch

from helpers.launch import torchrun

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "notebooks" / "scripts" / "ddp_train.py"
REPEATS = 5
# 16x16 images through a 32/64/64-channel CNN: about 5.5 GFLOP per step of 64 images
# for 56,772 weights (222 KiB to all-reduce), so compute dwarfs communication, and
# the activations of one rank's 32 images stay in its core's L2 cache. Measured while
# tuning: 32x32 images with 16 channels (bigger activations) gave ~1.5x, and smaller
# DDP buckets (--bucket-cap-mb 0.05, more overlap) were slower than one bucket.
WORK = ["--samples", "1920", "--batch-size", "64", "--image-size", "16",
        "--width", "32", "--epochs", "1", "--device", "cpu", "--seed", "0"]
CONFIGS = {"1proc": (1, 1), "2proc": (2, 1), "1proc_2threads": (1, 2)}


def _train(nproc: int, threads: int, out: Path) -> dict:
    """Run the script once; return its result file (weights, timing)."""
    dump = out / f"{nproc}x{threads}.pt"
    torchrun(SCRIPT, *WORK, "--dump", dump, "--checkpoint", out / "ckpt.pt",
             nproc=nproc, threads=threads, echo=False, timeout=300)
    return torch.load(dump, weights_only=True)


def run() -> dict[str, float | int | str]:
    """Measure the 2-process speedup and the weight difference against 1 process."""
    ms: dict[str, list[float]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(REPEATS):
            results = {name: _train(*cfg, Path(tmp)) for name, cfg in CONFIGS.items()}
            for name, r in results.items():
                ms[name].append(r["median_ms"])
        diff = (results["2proc"]["params"][0] - results["1proc"]["params"][0])
    med = {name: statistics.median(v) for name, v in ms.items()}
    for name, values in ms.items():
        print(f"   {name:15s} ms/step: " + ", ".join(f"{v:.1f}" for v in values))
    ddp = [a / b for a, b in zip(ms["1proc"], ms["2proc"], strict=True)]
    threads = [a / b for a, b in zip(ms["1proc"], ms["1proc_2threads"], strict=True)]
    return {
        "ddp_cpu_speedup_2proc": statistics.median(ddp),
        "ddp_cpu_speedup_2proc_spread": f"{min(ddp):.2f}-{max(ddp):.2f}",
        "ddp_cpu_speedup_1proc_2threads": statistics.median(threads),
        "ddp_cpu_speedup_1proc_2threads_spread":
            f"{min(threads):.2f}-{max(threads):.2f}",
        "ddp_cpu_ms_per_step_1proc": med["1proc"],
        "ddp_cpu_ms_per_step_2proc": med["2proc"],
        "ddp_cpu_allreduce_ms": results["2proc"]["allreduce_ms"],
        "ddp_cpu_max_param_diff": diff.abs().max().item(),
        "ddp_cpu_workload": " ".join(WORK[:-4]) + f", {REPEATS} rounds",
    }
