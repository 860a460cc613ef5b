"""Pipeline parallelism by hand: two stage processes overlap on micro-batches (gloo).

Launch with two processes, e.g. `torchrun --nproc-per-node=2 pipe_manual.py --out D`.
Rank 0 owns stage 1 of a ResNet-14, rank 1 owns stage 2 and the loss. The batch is
cut into micro-batches of `split_size` images; while rank 1 works on one, rank 0
already computes the next. Writes, for each split size, the median step time (over
`--rounds` rounds of `--repeats` steps) and the last step's timeline to D/pipe.json,
and one checked step's gradients and logits to D/stage{rank}.pt. With
`--schedules CHUNKS` the same two processes then run pipe_schedules.py's GPipe and
1F1B on the same batch (its D/schedules.json), timed under the same conditions.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

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
    p.add_argument("--splits", default="32,16,8,4,2", help="split sizes to time")
    p.add_argument("--check-split", type=int, default=8, help="split size to check")
    p.add_argument("--repeats", type=int, default=1, help="timed steps per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds over all split sizes")
    p.add_argument("--schedules", type=int, default=0, metavar="CHUNKS",
                   help="then run pipe_schedules.py with CHUNKS micro-batches (0: no)")
    return p.parse_args()


def main() -> None:
    """Check one pipelined step's gradients, then time every split size."""
    args = parse_args()
    # group norm: see the notebook's pitfall
    rank, _, stage, x, y = join_as_stage(args, norm="group")
    act_shape = cut_shape(args.image)  # what stage 1 hands to stage 2, per image

    _, logits = pipeline_step(stage, rank, x, y, args.check_split, act_shape)
    grads = [p.grad for p in stage.parameters()]
    torch.save({"grads": grads, "logits": logits}, Path(args.out) / f"stage{rank}.pt")

    splits = [int(s) for s in args.splits.split(",")]
    runs = {split: [] for split in splits}
    t0, events = shared_clock(), {}  # both ranks time their events from rank 0's t0
    for round_ in range(args.rounds):  # interleave the split sizes: fair under load
        for split in splits:
            def step(split=split) -> None:  # keeps the last step's timeline
                events[split], _ = pipeline_step(stage, rank, x, y, split, act_shape,
                                                 t0=t0)

            t = benchmark(step, warmup=int(round_ == 0), repeats=args.repeats)
            runs[split].append(t.median)
    results = {}
    for split in splits:
        median = statistics.median(runs[split])
        results[split] = {"median": median, "runs": runs[split],
                          "events": gather_events(events[split])}
        if rank == 0:
            print(f"split_size {split:3d}: {median * 1e3:5.0f} ms/step")
    if rank == 0:
        (Path(args.out) / "pipe.json").write_text(json.dumps(results))
    if args.schedules:  # the standalone script beside this one, on the same batch
        import pipe_schedules

        pipe_schedules.check_and_time(Path(args.out), x, y, args.schedules,
                                      repeats=3, device=torch.device("cpu"))
    leave_group()


if __name__ == "__main__":
    main()
