"""Pipeline parallelism by hand: two stage processes overlap on micro-batches.

    torchrun --standalone --nproc-per-node=2 pipe_manual.py --out D

Rank 0 owns stage 1 of a ResNet-14, rank 1 owns stage 2 and the loss: a GPU each over
nccl where there are two (`--device auto`), else a CPU process each over gloo. The
batch is cut into micro-batches of `split_size` images; while rank 1 works on one,
rank 0 already computes the next. First one float64 step on the batch's first
`--check-images` images, in micro-batches of `--check-split`, saves each stage's
gradients and the logits to D/stage{rank}.pt. Then, for each split size, it writes
the step times (`--rounds` rounds over all sizes, each a median of `--repeats`
steps) and the timeline of the round with the median time to D/pipe.json. Notebook
13 runs it through pipe_lessons.py, with pipe_schedules.py in the same processes.
Copy the whole folder, not this file: it imports pipe_stages.py and common.py.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch
from common import leave, save_record
from pipe_stages import (
    Event,
    as_events,
    checked_step,
    gather_events,
    join,
    make_stages,
    pipeline_step,
    seconds,
    shared_clock,
    stage_parser,
    synthetic_batch,
)
from torch.distributed.elastic.multiprocessing.errors import record


@dataclass
class SplitTiming:
    """One split size of the sweep: its step times and one timeline."""

    split: int  # images per micro-batch
    median: float  # seconds per step, over the rounds
    runs: list[float]  # each round's seconds
    shown_round: int  # the round (with the median time) whose timeline is kept
    events: list[Event]

    def __post_init__(self) -> None:
        self.events = as_events(self.events)  # read back from JSON: lists


@dataclass
class Sweep:
    """What rank 0 writes to <out>/pipe.json (notebook 13 reads it with load_record)."""

    splits: list[SplitTiming]  # in the order of --splits

    def __post_init__(self) -> None:  # read back from JSON: dicts
        self.splits = [s if isinstance(s, SplitTiming) else SplitTiming(**s)
                       for s in self.splits]


def add_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add this script's options to the pipeline scripts' parser."""
    p.add_argument("--splits", default="32,16,8,4,2", help="split sizes to time")
    p.add_argument("--check-images", type=int, default=8,
                   help="images of the float64 check step")
    p.add_argument("--check-split", type=int, default=2,
                   help="split size of the float64 check step")
    p.add_argument("--repeats", type=int, default=1, help="timed steps per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds over all split sizes")
    return p


def run(args: argparse.Namespace, rank: int, device: torch.device, x: torch.Tensor,
        y: torch.Tensor) -> Sweep:
    """Check one pipelined step's gradients, then time every split size."""
    stage = make_stages()[rank].to(device)  # same seed: both stages of one model
    x, y = x.to(device), y.to(device)
    n = args.check_images
    checked_step(stage, x[:n], y[:n], args.check_split, device,
                 Path(args.out) / f"stage{rank}.pt")

    splits = [int(s) for s in args.splits.split(",")]
    runs = {split: [] for split in splits}
    t0, events, last = shared_clock(), {split: [] for split in splits}, {}
    for round_ in range(args.rounds):  # interleave the split sizes: fair under load
        for split in splits:
            def step(split=split) -> None:  # keeps the step's timeline
                last[split], _ = pipeline_step(stage, x, y, split, device, t0=t0)

            times = seconds(step, device, args.repeats, warmup=int(round_ == 0))
            runs[split].append(statistics.median(times))
            events[split].append(gather_events(last[split]))  # this round's last
    sweep = Sweep([])
    for split in splits:
        # rank 0 keeps the timeline of its round with the median time (lower middle)
        middle = sorted(range(args.rounds), key=runs[split].__getitem__)[
            (args.rounds - 1) // 2]
        timing = SplitTiming(split, statistics.median(runs[split]), runs[split],
                             middle, events[split][middle])
        sweep.splits.append(timing)
        if rank == 0:
            print(f"split_size {split:3d}: {timing.median * 1e3:6.1f} ms/step")
    if rank == 0:
        save_record(Path(args.out) / "pipe.json", sweep)
    return sweep


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main() -> None:
    """Join the group, check and time every split size on one batch, leave."""
    args = add_options(stage_parser(__doc__)).parse_args()
    rank, device = join(args)
    run(args, rank, device, *synthetic_batch(args.batch, args.image))
    leave()


if __name__ == "__main__":
    main()
