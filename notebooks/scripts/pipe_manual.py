"""Pipeline parallelism by hand: two stage processes overlap on micro-batches (gloo).

Launch with two processes, e.g. `torchrun --nproc-per-node=2 pipe_manual.py --out D`.
Rank 0 owns stage 1 of a ResNet-14, rank 1 owns stage 2 and the loss. The batch is
cut into micro-batches of `split_size` images; while rank 1 works on one, rank 0
already computes the next. Writes, for each split size, the median step time (over
`--rounds` rounds of `--repeats` steps) and one recorded timeline to D/pipe.json, and
one checked step's gradients and logits to D/stage{rank}.pt.
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
    p.add_argument("--splits", default="32,16,8,4,2", help="split sizes to time")
    p.add_argument("--check-split", type=int, default=8, help="split size to check")
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("OMP_NUM_THREADS", "1")),
                   help="torch threads per process")
    p.add_argument("--repeats", type=int, default=3, help="timed steps per round")
    p.add_argument("--rounds", type=int, default=1, help="rounds over all split sizes")
    return p.parse_args()


def main() -> None:
    """Check one pipelined step's gradients, then time every split size."""
    args = parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = make_resnet(norm="group", seed=0)  # group norm: see the notebook's pitfall
    stage = split_stages(model)[rank]
    torch.manual_seed(1)
    x = torch.randn(args.batch, 3, args.image, args.image)  # synthetic images
    y = torch.randint(0, 10, (args.batch,))
    act_shape = cut_shape(args.image)  # what stage 1 hands to stage 2, per image

    _, logits = pipeline_step(stage, rank, x, y, args.check_split, act_shape)
    grads = [p.grad for p in stage.parameters()]
    torch.save({"grads": grads, "logits": logits}, Path(args.out) / f"stage{rank}.pt")

    splits = [int(s) for s in args.splits.split(",")]
    runs = {split: [] for split in splits}
    for round_ in range(args.rounds):  # interleave the split sizes: fair under load
        for split in splits:
            def step(split=split) -> None:
                pipeline_step(stage, rank, x, y, split, act_shape)

            t = benchmark(step, warmup=int(round_ == 0), repeats=args.repeats)
            runs[split].append(t.median)
    results = {}
    for split in splits:
        t0 = [time.perf_counter()]  # one system-wide clock: both ranks measure
        dist.broadcast_object_list(t0, src=0)  # from rank 0's start
        events, _ = pipeline_step(stage, rank, x, y, split, act_shape, t0=t0[0])
        both = [None, None]
        dist.all_gather_object(both, events)
        median = statistics.median(runs[split])
        results[split] = {"median": median, "runs": runs[split],
                          "events": both[0] + both[1]}
        if rank == 0:
            print(f"split_size {split:3d}: {median * 1e3:5.0f} ms/step")
    if rank == 0:
        (Path(args.out) / "pipe.json").write_text(json.dumps(results))
    leave_group()


if __name__ == "__main__":
    main()
