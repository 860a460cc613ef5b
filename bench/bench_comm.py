"""The communication keys of notebook 11, from one 4-rank gloo launch on the CPU.

Runs notebooks/scripts/comm_buckets.py --collectives, as the notebook does: the ring
all-reduce built from send/recv against dist.all_reduce (largest absolute difference,
4 MiB of float32 per rank), the bus bandwidth of a 64 MiB all-reduce (nccl-tests'
busbw = algbw x 2(N-1)/N, median of 5) with one rank's memory-copy bandwidth beside
it as the ceiling for processes that talk through memory, and the share of DDP's
all-reduce time that ran during backward with 8 buckets (bucket_cap_mb=0.25).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from helpers.launch import torchrun

SCRIPT = Path(__file__).resolve().parents[1] / "notebooks/scripts/comm_buckets.py"
RANKS = 4
KEYS = ("ring_allreduce_max_diff", "gloo_busbw_64MiB_GBps", "gloo_memcpy_GBps",
        "ddp_overlap_fraction")


def run() -> dict[str, float]:
    """Return the ring's error, gloo's 64 MiB busbw, memcpy GB/s and DDP's overlap."""
    with tempfile.TemporaryDirectory() as out:
        torchrun(SCRIPT, "--out", out, "--collectives", "--device", "cpu",
                 nproc=RANKS, threads=1, echo=False, timeout=600)
        bw = json.loads((Path(out) / "bandwidth.json").read_text())
        overlap = json.loads((Path(out) / "overlap.json").read_text())
    big = bw["sweeps"]["gloo"][-1]
    assert big["bytes"] == 64 * 2**20, f"the sweep ended at {big['bytes']} bytes"
    print(f"{RANKS} gloo ranks: 64 MiB all-reduce busbw {big['busbw']:.2f} GB/s, "
          f"memory copy {bw['memcpy_GBps']:.1f} GB/s; DDP overlap {overlap['ddp']:.0%}")
    return {"ring_allreduce_max_diff": bw["ring"]["max_diff"],
            "gloo_busbw_64MiB_GBps": big["busbw"],
            "gloo_memcpy_GBps": bw["memcpy_GBps"],
            "ddp_overlap_fraction": overlap["ddp"]}
