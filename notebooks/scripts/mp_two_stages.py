"""Naive model parallelism for real: two processes, one ResNet-14 stage each (gloo).

Launch with two processes, e.g. `torchrun --nproc-per-node=2 mp_two_stages.py --out D`.
Rank 0 owns stage 1; rank 1 owns stage 2 and the loss. They exchange the activation
and its gradient with send/recv, so each process stands in for one device. Writes
timings and one step's timeline to D/mp.json, and each stage's gradients to
D/stage{rank}.pt.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from helpers.stages import (
    cut_shape,
    leave_group,
    make_resnet,
    pipeline_step,
    split_stages,
)
from helpers.timing import benchmark


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True, help="folder for the results")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--image", type=int, default=64, help="image height and width")
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("OMP_NUM_THREADS", "1")),
                   help="torch threads per process")
    p.add_argument("--repeats", type=int, default=3, help="timed steps of each kind")
    return p.parse_args()


def main() -> None:
    """Time one process vs two stage processes, then record one naive step."""
    args = parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = make_resnet(seed=0)  # every rank builds the same weights ...
    stage = split_stages(model)[rank]  # ... and keeps only its own stage
    torch.manual_seed(1)
    x = torch.randn(args.batch, 3, args.image, args.image)  # synthetic images
    y = torch.randint(0, 10, (args.batch,))
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

    def split_step() -> None:  # the naive split over the two processes
        pipeline_step(stage, rank, x, y, args.batch, act_shape)

    single, split = [], []
    for _ in range(args.repeats):  # alternate, so that changing load hits both alike
        if rank == 0:  # rank 1 waits at the barrier meanwhile
            single.append(benchmark(whole_step, warmup=1, repeats=1).median)
        dist.barrier()
        split.append(benchmark(split_step, warmup=1, repeats=1).median)
    results = {"act_mib": act.numel() * 4 / 2**20, "copy_s": t_copy.median / 2,
               "single_s": statistics.median(single or [0.0]),
               "split_s": statistics.median(split)}

    model.zero_grad()  # one recorded step, from zero gradients, for the timeline
    t0 = [time.perf_counter()]  # perf_counter is one system-wide clock (Linux, macOS,
    dist.broadcast_object_list(t0, src=0)  # Windows): both ranks use rank 0's start
    events, logits = pipeline_step(stage, rank, x, y, args.batch, act_shape, t0=t0[0])
    grads = [p.grad for p in stage.parameters()]
    torch.save({"grads": grads, "logits": logits}, Path(args.out) / f"stage{rank}.pt")
    timelines = [None, None]
    dist.all_gather_object(timelines, events)
    if rank == 0:
        results["events"] = timelines[0] + timelines[1]
        (Path(args.out) / "mp.json").write_text(json.dumps(results))
        print(f"one process, whole model: {results['single_s'] * 1e3:.0f} ms/step")
        print(f"two processes, naive split: {results['split_s'] * 1e3:.0f} ms/step")
        print(f"copy of the {results['act_mib']:.1f} MiB activation: "
              f"{results['copy_s'] * 1e3:.1f} ms each way")
    leave_group()


if __name__ == "__main__":
    main()
