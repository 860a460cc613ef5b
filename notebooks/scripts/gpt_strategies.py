"""Three strategies on one transformer: DDP, FSDP2 and one process, in float64.

§8 of notebook 16: each trains the same steps from the same weights; it keeps its
weights (to compare, gathered on every rank), step times, collectives and their
bytes (common.Traffic), this rank's bytes and, on a GPU, its peak. Run by
gpt_lessons.py; copy the folder, not this file.
"""

from __future__ import annotations

import statistics

import torch
import torch.distributed as dist
from common import Traffic, full_state
from gpt_fsdp import adam, build, ddp, gpu_peak, gpu_reset, replica, state_bytes, train


def strategies(cfg, data, device, mesh, rank, world, steps) -> dict:
    """§8: DDP, FSDP2, then one process on rank 0 alone, in float64: each one's
    weights, step times, collectives and bytes (and its peak, on a GPU)."""
    res, group, f64 = {}, mesh.get_group(), torch.float64
    make = {"ddp": lambda: ddp(replica(cfg, f64, device), group),
            "fsdp": lambda: build(cfg, f64, device, mesh),
            "single": lambda: replica(cfg, f64, device)}
    for name, fn in make.items():
        dist.barrier(group)  # each strategy starts on a quiet machine
        if name == "single" and rank != 0:
            continue  # rank 1 waits at the last barrier: rank 0 trains alone
        dp = (0, 1) if name == "single" else (rank, world)
        model = opt = None  # the last strategy's model, gradients and Adam state go
        held = gpu_reset(device)  # from here: this strategy's peak, above what is left
        model, times = fn(), []
        opt = adam(model)
        with Traffic() as traffic:  # the first step: counted, and a warm-up
            train(model, opt, data, 1, dp=dp)
        train(model, opt, data, steps - 1, first=1, dp=dp, times=times)
        res[name] = {"params": full_state(model),  # DDP's, FSDP2's: every rank
                     "step_s": statistics.median(times), "samples": times,
                     "traffic": traffic.bytes, "calls": traffic.calls,
                     "bytes": state_bytes(model, opt), "peak": gpu_peak(device, held)}
    dist.barrier(group)
    return res
