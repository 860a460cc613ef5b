"""The memory of building a sharded model (notebook 16, §1): meta vs naive.

    torchrun --standalone --nproc-per-node=4 gpt_build.py --out build/gpt

The largest bytes one rank holds while it builds and initialises a deeper model the
meta way (gpt_fsdp.build: shapes only, shard, then memory for the shards) or the naive
way (the whole model on every rank, then shards). On a GPU the allocator's peak; on a
CPU the profiler's allocations, op by op. Each rank writes a `BuildPeak` record to
OUT/build_r{rank}.json. Notebook 16 runs it through gpt_lessons.py; it imports gpt.py,
gpt_fsdp.py and common.py: copy the folder, not this file.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

import gpt
import torch
import torch.distributed as dist
from common import leave, save_record, setup
from gpt_fsdp import build
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.fsdp import fully_shard


@dataclasses.dataclass
class BuildPeak:
    """One rank's bytes: the model, and the peaks of the two ways to build it."""

    full: int  # float32 bytes of the whole model
    meta: int  # the peak of a meta build
    naive: int  # the peak of a naive build
    largest: int  # float32 bytes of the largest parameter


def peak_bytes(fn, device) -> int:
    """Return the most bytes allocated at once while `fn()` runs, above the start."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        fn()
        return torch.cuda.max_memory_allocated(device) - start
    saved = os.dup(2)  # workaround: the profiler logs a CUDA probe to stderr
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    try:  # the profiler without kineto: nothing to start up, the same allocations
        with torch.autograd.profiler.profile(use_kineto=False,
                                             profile_memory=True) as prof:
            fn()
    finally:
        os.dup2(saved, 2)
    now = top = 0  # each op's allocations less its frees, in the order they ran
    for e in sorted(prof.function_events, key=lambda e: e.time_range.start):
        now += e.self_cpu_memory_usage
        top = max(top, now)
    return top


def build_memory(device, mesh) -> BuildPeak:
    """§1: the peak of a meta build and of a naive build, in a deeper model."""
    cfg = gpt.Config(layers=8)  # deeper: one parameter is a small part of the model
    full = gpt.count_params(gpt.GPT(cfg)) * 4  # float32 bytes of the whole model

    def naive():
        model = gpt.GPT(cfg).to(device)  # the whole model on every rank
        gpt.init_weights(model)
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)

    meta = peak_bytes(lambda: build(cfg, torch.float32, device, mesh), device)
    return BuildPeak(full=full, meta=meta, naive=peak_bytes(naive, device),
                     largest=max(p.numel() for p in gpt.GPT(cfg).parameters()) * 4)


def run(device: torch.device, out: Path) -> BuildPeak:
    """Measure both builds on a mesh of every rank; write this rank's record."""
    result = build_memory(device, init_device_mesh(device.type,
                                                   (dist.get_world_size(),)))
    save_record(out / f"build_r{dist.get_rank()}.json", result)
    return result


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for the results")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    args = p.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    run(setup(args.device), Path(args.out))
    leave()


if __name__ == "__main__":
    main()
