"""torch.distributed.pipelining: our two stages run by ScheduleGPipe and Schedule1F1B.

Launch with two processes, e.g. `torchrun --nproc-per-node=2 pipe_schedules.py --out D`.
Rank r wraps stage r of the ResNet-14 in a `PipelineStage`; a schedule cuts each batch
into `--chunks` micro-batches and runs forwards, backwards and the send/recv between
the ranks in its own order. For each schedule this saves one step's gradients to
D/{schedule}_stage{rank}.pt, then times steps and writes D/schedules.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from helpers.stages import join_as_stage, leave_group, stage_parser
from helpers.timing import benchmark

SCHEDULES = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    p = stage_parser(__doc__)
    p.add_argument("--chunks", type=int, default=4, help="micro-batches per batch")
    p.add_argument("--repeats", type=int, default=3, help="timed steps per schedule")
    return p.parse_args()


def main() -> None:
    """Check and time each schedule on this rank's stage."""
    args = parse_args()
    rank, _, module, x, y = join_as_stage(args, norm="group")
    cpu = torch.device("cpu")

    timings = {}
    for name, schedule_cls in SCHEDULES.items():
        stage = PipelineStage(module, stage_index=rank, num_stages=2, device=cpu)
        # the loss is a mean per micro-batch; the schedule divides the summed
        # gradients by the number of micro-batches (scale_grads=True by default)
        schedule = schedule_cls(stage, n_microbatches=args.chunks,
                                loss_fn=F.cross_entropy)

        def step(schedule=schedule) -> torch.Tensor | None:
            if rank == 0:
                return schedule.step(x)  # the first stage feeds the inputs
            return schedule.step(target=y)  # the last one computes the loss

        module.zero_grad()
        out = step()
        grads = [p.grad.clone() for p in module.parameters()]
        torch.save({"grads": grads, "logits": out}, Path(args.out) /
                   f"{name}_stage{rank}.pt")
        timings[name] = benchmark(step, warmup=1, repeats=args.repeats).median
        if rank == 0:
            print(f"{name:5s} with {args.chunks} micro-batches: "
                  f"{timings[name] * 1e3:.0f} ms/step")
    if rank == 0:
        (Path(args.out) / "schedules.json").write_text(json.dumps(timings))
    leave_group()


if __name__ == "__main__":
    main()
