"""The communication keys of notebook 11, from one 4-rank gloo launch on the CPU.

Runs notebooks/scripts/comm_lessons.py, as the notebook does: the ring
all-reduce built from send/recv against dist.all_reduce (largest absolute difference,
4 MiB of float32 per rank), the bus bandwidth of a 64 MiB all-reduce (nccl-tests'
busbw = algbw x 2(N-1)/N, median of 5) with one rank's memory-copy bandwidth beside
it as the ceiling for processes that talk through memory, and the share of DDP's
all-reduce time that ran during backward with 8 buckets (bucket_cap_mb=0.25).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from helpers.launch import torchrun

SCRIPTS = Path(__file__).resolve().parents[1] / "notebooks/scripts"
SCRIPT = SCRIPTS / "comm_lessons.py"
RANKS = 4
KEYS = ("ring_allreduce_max_diff", "gloo_busbw_64MiB_GBps", "gloo_memcpy_GBps",
        "ddp_overlap_fraction")


def run() -> dict[str, float]:
    """Return the ring's error, gloo's 64 MiB busbw, memcpy GB/s and DDP's overlap."""
    sys.path.insert(0, str(SCRIPTS))  # the scripts' records: common.load_record
    import comm_bandwidth
    import comm_overlap
    import comm_ring
    import common

    with tempfile.TemporaryDirectory() as out:
        torchrun(SCRIPT, "--out", out, "--device", "cpu",
                 nproc=RANKS, threads=1, echo=False, timeout=600)
        bw = common.load_record(Path(out) / "bandwidth.json", comm_bandwidth.Bandwidth)
        ring = common.load_record(Path(out) / "ring.json", comm_ring.Ring)
        overlap = common.load_record(Path(out) / "overlap.json", comm_overlap.Overlap)
    big = bw.sweeps["gloo"][-1]
    assert big.bytes == 64 * 2**20, f"the sweep ended at {big.bytes} bytes"
    print(f"{RANKS} gloo ranks: 64 MiB all-reduce busbw {big.busbw:.2f} GB/s, "
          f"memory copy {bw.memcpy_GBps:.1f} GB/s; DDP overlap {overlap.ddp:.0%}")
    return {"ring_allreduce_max_diff": ring.max_diff,
            "gloo_busbw_64MiB_GBps": big.busbw,
            "gloo_memcpy_GBps": bw.memcpy_GBps,
            "ddp_overlap_fraction": overlap.ddp}
