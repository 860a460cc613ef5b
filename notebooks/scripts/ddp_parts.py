"""What the DDP scripts share besides DDP itself: the checkpoint and the report.

ddp_train.py, ddp_resume.py, ddp_eval.py and ddp_by_hand.py train common.py's `Net`
on its `make_data` images. The first three end with `report`, which checks that
every rank holds the same weights and saves what a notebook reads (--dump): one
`Report` record, with torch.save (it holds the weights). Copy the whole folder:
these scripts import common.py and each other.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from common import clock, save_record
from torch import nn
from torch.nn.utils import parameters_to_vector


def save(checkpoint: dict, path: Path) -> None:
    """Write a checkpoint atomically: to a temporary file, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, path.with_suffix(".tmp"))
    path.with_suffix(".tmp").replace(path)


@dataclass
class Report:
    """What rank 0 saves to --dump (a .pt file): the run, and every rank's weights."""

    params: torch.Tensor  # [rank, weight]: each rank's weights, flattened
    losses: list[float]  # each epoch's mean
    step_ms: list[float]  # each timed step
    median_ms: float
    allreduce_ms: float  # one all-reduce of the gradients' size
    world_size: int
    backend: str
    device: str
    amp: str | None = None  # ddp_train.py, ddp_eval.py: --amp
    val: list[int] | None = None  # ddp_eval.py: right, counted
    restarts: int | None = None  # ddp_resume.py: torchrun's restarts so far
    start_epoch: int | None = None  # ddp_resume.py: where this attempt began
    start_step: int | None = None


def report(model: nn.Module, losses: list[float], step_ms: list[float],
           dump: str | None = None, **extra) -> None:
    """Time one all-reduce of the weights, check that every rank holds the same ones,
    and let rank 0 print that and save it all to `dump` (with `extra`)."""
    mine = parameters_to_vector(model.parameters()).detach()
    ms = []
    for _ in range(23):  # 20 all-reduces of the gradients' size, after 3 to warm up
        t = clock(mine.device)
        dist.all_reduce(mine.clone())
        ms.append(1e3 * (clock(mine.device) - t))
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)  # each rank sends its copy to all
    if dist.get_rank() != 0:
        return
    every = torch.stack(every).cpu()
    spread = (every - every[0]).abs().max().item()
    median = statistics.median(step_ms) if step_ms else float("nan")
    allreduce_ms = statistics.median(ms[3:])
    print(f"{len(step_ms)} timed steps: median {median:.1f} ms per step")
    print(f"weights on all {len(every)} ranks identical: {spread == 0} "
          f"(max difference {spread:.1e})")
    print(f"one all-reduce of the {4 * mine.numel() / 1024:.0f} KiB of gradients: "
          f"median {allreduce_ms:.2f} ms", flush=True)
    if dump:
        save_record(dump, Report(
            every, losses, step_ms, median, allreduce_ms, len(every),
            dist.get_backend(), mine.device.type, **extra))
