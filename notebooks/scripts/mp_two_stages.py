"""Naive model parallelism for real: two processes, one ResNet-14 stage each (gloo).

Launch with two processes, e.g. `torchrun --nproc-per-node=2 mp_two_stages.py --out D`.
Rank 0 owns stage 1; rank 1 owns stage 2 and the loss. They exchange the activation
and its gradient with send/recv, so each process stands in for one device. Writes
the median timings and the last split step's timeline to D/mp.json, and that step's
gradients of each stage to D/stage{rank}.pt.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from helpers.stages import (
    cut_shape,
    gather_events,
    join_as_stage,
    leave_group,
    pipeline_step,
    shared_clock,
    stage_parser,
)
from helpers.timing import benchmark


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    p = stage_parser(__doc__)
    p.add_argument("--repeats", type=int, default=3, help="timed steps of each kind")
    return p.parse_args()


def main() -> None:
    """Time one process vs two stage processes; save the last split step."""
    args = parse_args()
    rank, model, stage, x, y = join_as_stage(args)
    act_shape = cut_shape(args.image)  # what stage 1 hands to stage 2, per image

    act = torch.zeros(args.batch, *act_shape)

    def ping_pong() -> None:  # the activation there and back
        if rank == 0:
            dist.send(act, dst=1)
            dist.recv(act, src=1)
        else:
            dist.recv(act, src=0)
            dist.send(act, dst=0)

    t_copy = benchmark(ping_pong, warmup=2, repeats=10)

    def whole_step() -> None:  # the whole model in one process
        F.cross_entropy(model(x), y).backward()

    t0, last = shared_clock(), {}  # both ranks time their events from rank 0's t0

    def split_step() -> None:  # the naive split over the two processes
        stage.zero_grad()  # from zero: the last step's gradients are checked
        last["events"], last["logits"] = pipeline_step(stage, rank, x, y, args.batch,
                                                       act_shape, t0=t0)

    single, split = [], []
    for i in range(args.repeats):  # alternate, so that changing load hits both alike
        if rank == 0:  # rank 1 waits at the barrier meanwhile
            single.append(benchmark(whole_step, warmup=int(i == 0), repeats=1).median)
        dist.barrier()
        split.append(benchmark(split_step, warmup=int(i == 0), repeats=1).median)
    results = {"act_mib": act.numel() * 4 / 2**20, "copy_s": t_copy.median / 2,
               "single_s": statistics.median(single or [0.0]),
               "split_s": statistics.median(split)}

    events = gather_events(last["events"])  # the last timed split step, both ranks
    grads = [p.grad for p in stage.parameters()]
    torch.save({"grads": grads, "logits": last["logits"]},
               Path(args.out) / f"stage{rank}.pt")
    if rank == 0:
        results["events"] = events
        (Path(args.out) / "mp.json").write_text(json.dumps(results))
        print(f"one process, whole model: {results['single_s'] * 1e3:.0f} ms/step")
        print(f"two processes, naive split: {results['split_s'] * 1e3:.0f} ms/step")
        print(f"copy of the {results['act_mib']:.1f} MiB activation: "
              f"{results['copy_s'] * 1e3:.1f} ms each way")
    leave_group()


if __name__ == "__main__":
    main()
