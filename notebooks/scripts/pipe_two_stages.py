"""Naive model parallelism for real: two processes, one ResNet-14 stage each.

    torchrun --standalone --nproc-per-node=2 pipe_two_stages.py --out D

Rank 0 owns stage 1; rank 1 owns stage 2 and the loss. They exchange the activation
and its gradient with send/recv, so each process stands in for one device: a GPU each
over nccl where there are two (`--device auto`), else a CPU process each over gloo.
Saves one float64 step's gradients and logits on the batch's first `--check-images`
images to D/stage{rank}.pt, then writes the timings (one process with the whole model
against the two stage processes, interleaved) and the last split step's timeline to
D/mp.json (a TwoStages record). Notebook 12 runs it. Copy the whole folder, not this
file: it imports pipe_stages.py and common.py.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from common import save_record
from pipe_stages import (
    Event,
    as_events,
    checked_step,
    cut_shape,
    gather_events,
    join,
    make_stages,
    pipeline_step,
    seconds,
    shared_clock,
    stage_parser,
    synthetic_batch,
)
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record


@dataclass
class TwoStages:
    """What rank 0 writes to <out>/mp.json (notebook 12 reads it with load_record)."""

    backend: str
    act_mib: float  # the activation that crosses the cut
    copy_s: float  # its copy, one way
    single: list[float]  # seconds per step: the whole model in one process
    split: list[float]  # the naive split over two processes, in the same rounds
    single_s: float  # medians
    split_s: float
    events: list[Event]  # the last split step's timeline, both ranks

    def __post_init__(self) -> None:
        self.events = as_events(self.events)  # read back from JSON: lists


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    p = stage_parser(__doc__)
    p.add_argument("--repeats", type=int, default=3, help="timed steps of each kind")
    p.add_argument("--check-images", type=int, default=8,
                   help="images of the float64 check step")
    return p.parse_args()


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main() -> None:
    """Check one split step, then time one process against two stage processes."""
    args = parse_args()
    rank, device = join(args)
    stages = make_stages()  # every rank builds the same weights ...
    stage = stages[rank].to(device)  # ... and keeps only its own stage
    whole = nn.Sequential(*stages).to(device)  # rank 0 also times the whole model
    x, y = (t.to(device) for t in synthetic_batch(args.batch, args.image))
    n = args.check_images  # naive: the check batch is one micro-batch
    checked_step(stage, x[:n], y[:n], n, device, Path(args.out) / f"stage{rank}.pt")

    act = torch.zeros(args.batch, *cut_shape(args.image), device=device)

    def ping_pong() -> None:  # the activation there and back
        if rank == 0:
            dist.send(act, dst=1)
            dist.recv(act, src=1)
        else:
            dist.recv(act, src=0)
            dist.send(act, dst=0)

    t_copy = statistics.median(seconds(ping_pong, device, repeats=10, warmup=2))

    def whole_step() -> None:  # the whole model in one process
        F.cross_entropy(whole(x), y).backward()

    t0, last = shared_clock(), {}  # both ranks time their events from rank 0's t0

    def split_step() -> None:  # the naive split over the two processes
        last["events"], _ = pipeline_step(stage, x, y, args.batch, device, t0=t0)

    single, split = [], []
    for i in range(args.repeats):  # alternate, so that changing load hits both alike
        if rank == 0:  # rank 1 waits at the barrier meanwhile
            single += seconds(whole_step, device, repeats=1, warmup=int(i == 0))
        dist.barrier()
        split += seconds(split_step, device, repeats=1, warmup=int(i == 0))
    events = gather_events(last["events"])  # the last timed split step, both ranks
    if rank == 0:
        result = TwoStages(dist.get_backend(), act.numel() * 4 / 2**20, t_copy / 2,
                           single, split, statistics.median(single or [0.0]),
                           statistics.median(split), events)
        save_record(Path(args.out) / "mp.json", result)
        print(f"one process, whole model: {result.single_s * 1e3:.0f} ms/step")
        print(f"two processes, naive split: {result.split_s * 1e3:.0f} ms/step")
        print(f"copy of the {result.act_mib:.1f} MiB activation: "
              f"{result.copy_s * 1e3:.2f} ms each way")
    dist.barrier()  # nobody leaves while the other rank still communicates
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
