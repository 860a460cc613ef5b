"""torch.distributed.pipelining: a two-stage ResNet-14 run by ScheduleGPipe and 1F1B.

    torchrun --standalone --nproc-per-node=2 pipe_schedules.py --out D

Every rank builds the same seeded model and keeps one stage of it, wrapped in a
`PipelineStage`; a schedule cuts each batch into `--chunks` micro-batches and runs
the forwards, the backwards and the sends and receives between the ranks in its own
order. With `--device auto` and one GPU per rank it uses nccl, otherwise gloo on the
CPU (`--device cpu` forces that). For each schedule `check_and_time` runs one float64
step from zero gradients on the batch's first 2 images per micro-batch and saves its
gradients and logits to D/{schedule}_stage{rank}.pt, to check against the unsplit
model; then it times float32 steps on the whole batch and writes each schedule's
step times to D/schedules.json (a ScheduleTimes record). Notebook 13 runs it through
pipe_lessons.py, on pipe_manual.py's batch in the same processes. Copy the whole
folder, not this file: it imports pipe_stages.py and common.py.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from common import leave, save_record
from pipe_stages import join, make_stages, seconds, stage_parser, synthetic_batch
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

SCHEDULES = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}


@dataclass
class ScheduleTimes:
    """What rank 0 writes to <out>/schedules.json (notebook 13 reads it)."""

    chunks: int  # micro-batches per step
    seconds: dict[str, list[float]]  # each timed step, by schedule: GPipe, 1F1B


def add_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add this script's options to the pipeline scripts' parser."""
    p.add_argument("--chunks", type=int, default=4, help="micro-batches per batch")
    p.add_argument("--schedule-repeats", type=int, default=3,
                   help="timed steps per schedule")
    return p


def make_step(schedule_cls: type, module: nn.Module, device: torch.device,
              chunks: int, x: torch.Tensor, y: torch.Tensor
              ) -> Callable[[], torch.Tensor | None]:
    """Wrap this rank's module in a PipelineStage; return a function for one step."""
    rank = dist.get_rank()
    stage = PipelineStage(module, stage_index=rank, num_stages=2, device=device)
    # the loss is a mean per micro-batch; the schedule divides the summed gradients by
    # the number of micro-batches (scale_grads=True), so they equal the full batch's
    schedule = schedule_cls(stage, n_microbatches=chunks, loss_fn=F.cross_entropy)

    def step() -> torch.Tensor | None:
        if rank == 0:
            return schedule.step(x)  # the first stage feeds the inputs
        return schedule.step(target=y)  # the last stage computes the loss
    return step


def check_and_time(out: Path, x: torch.Tensor, y: torch.Tensor, chunks: int,
                   repeats: int, device: torch.device) -> dict[str, list[float]]:
    """Check each schedule in float64, then time it in float32; return step times."""
    rank = dist.get_rank()
    module = make_stages()[rank].to(device)  # same seed: both stages of one model
    x, y = x.to(device), y.to(device)
    xc, yc = x[:2 * chunks].double(), y[:2 * chunks]  # float64 is slow: 2 per chunk
    for name, schedule_cls in SCHEDULES.items():  # float64: a check free of rounding
        module.double().zero_grad()
        logits = make_step(schedule_cls, module, device, chunks, xc, yc)()
        torch.save({"grads": [p.grad.cpu() for p in module.parameters()],
                    "logits": None if logits is None else logits.cpu()},
                   out / f"{name}_stage{rank}.pt")
    module.float()
    timings = {}
    for name, schedule_cls in SCHEDULES.items():
        step = make_step(schedule_cls, module, device, chunks, x, y)
        timings[name] = seconds(step, device, repeats)  # after one warm-up step
        if rank == 0:
            print(f"{name:5s} with {chunks} micro-batches: "
                  f"{statistics.median(timings[name]) * 1e3:6.1f} ms/step")
    if rank == 0:
        save_record(out / "schedules.json", ScheduleTimes(chunks, timings))
    return timings


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main() -> None:
    """Join the group, check and time both schedules on one batch, leave."""
    args = add_options(stage_parser(__doc__)).parse_args()
    _, device = join(args)
    x, y = synthetic_batch(args.batch, args.image)
    check_and_time(Path(args.out), x, y, args.chunks, args.schedule_repeats, device)
    leave()


if __name__ == "__main__":
    main()
