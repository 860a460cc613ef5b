"""What the three pipeline scripts share: joining as two stages, a two-stage
ResNet-14, and one hand-written pipelined training step that records its timeline.

The pipelining family's shared file, used by pipe_two_stages.py (notebook 12),
pipe_manual.py and pipe_schedules.py (notebook 13); it imports common.py. Copy the
whole folder, not this file. Nothing here joins a group or touches a GPU at import.
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from common import setup, sync
from torch import nn


class Event(NamedTuple):
    """One bar of a timeline: a stage's forward or backward of one micro-batch.

    The one definition: helpers/stages.py and helpers/plotting.py read these fields
    (a notebook imports this file; this folder cannot import helpers/). JSON keeps an
    Event as a list; `as_events` turns such lists back into Events.
    """

    stage: int  # 0 or 1
    kind: str  # "F" (forward) or "B" (backward)
    micro: int  # micro-batch
    start: float  # seconds since the step's common start (shared_clock)
    end: float


def as_events(rows: Iterable[Sequence]) -> list[Event]:
    """Return `rows` (Events, or lists read back from JSON) as Events."""
    return [Event(*row) for row in rows]


def out_folder(path: str) -> Path:
    """Return `path` as a folder that exists, made with its parents if missing."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def stage_parser(description: str) -> argparse.ArgumentParser:
    """Return a parser with the options every pipeline script takes."""
    p = argparse.ArgumentParser(description=description.split("\n")[0])
    p.add_argument("--out", required=True, type=out_folder,
                   help="folder for the results (made if missing)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--image", type=int, default=64, help="image height and width")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: nccl and one GPU per stage if there are enough, else "
                        "gloo on the CPU")
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("OMP_NUM_THREADS", "1")),
                   help="CPU threads per process")
    return p


def join(args: argparse.Namespace) -> tuple[int, torch.device]:
    """Join the group of exactly two stage processes; return rank and device."""
    device = setup(args.device)
    torch.set_num_threads(args.threads)
    if dist.get_world_size() != 2:
        raise SystemExit("run this script with exactly 2 processes, one per stage")
    rank = dist.get_rank()
    print(f"stage {rank + 1} on {device}, over {dist.get_backend()}")
    return rank, device


def synthetic_batch(batch: int, image: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the seeded random images and labels that every rank and notebook uses."""
    torch.manual_seed(1)
    return torch.randn(batch, 3, image, image), torch.randint(0, 10, (batch,))


class Block(nn.Module):
    """A ResNet basic block: two 3x3 convolutions plus a shortcut, GroupNorm."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(8, cout)  # per sample: safe with micro-batches
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(8, cout)
        self.shortcut = (nn.Identity() if stride == 1 and cin == cout else
                         nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.GroupNorm(8, cout)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return relu(norm(conv(relu(norm(conv(x))))) + shortcut(x))."""
        out = F.relu(self.norm1(self.conv1(x)))
        return F.relu(self.norm2(self.conv2(out)) + self.shortcut(x))


def make_stages(num_classes: int = 10, seed: int = 0
                ) -> tuple[nn.Sequential, nn.Sequential]:
    """Build a seeded ResNet-14 (ResNet-18 without layer4), cut after layer1.

    Written out, not helpers.models.make_resnet: that one is torchvision's resnet18,
    which notebooks 12-14 teach to cut by its named layers, and this folder runs
    with torch alone. tests/test_stages.py holds the two to the same shapes.
    """
    torch.manual_seed(seed)
    stem = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.GroupNorm(8, 64), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1)]  # a quarter of the image side, 64 channels
    stage1 = nn.Sequential(*stem, Block(64, 64), Block(64, 64))
    stage2 = nn.Sequential(Block(64, 128, 2), Block(128, 128), Block(128, 256, 2),
                           Block(256, 256), nn.AdaptiveAvgPool2d(1), nn.Flatten(1),
                           nn.Linear(256, num_classes))
    return stage1, stage2


def cut_shape(image: int) -> tuple[int, int, int]:
    """Return the per-image shape stage 1 hands to stage 2 for `image`-pixel inputs."""
    side = -(-image // 4)  # the stem halves the image twice (conv, then max-pool)
    return (64, side, side)


def pipeline_step(stage: nn.Module, x: torch.Tensor, y: torch.Tensor,
                  split_size: int, device: torch.device,
                  t0: float | None = None) -> tuple[list[Event], torch.Tensor | None]:
    """Run this rank's stage on one batch in micro-batches; return timeline, logits."""
    # Rank 0 runs every forward first, sending each activation to rank 1, then each
    # backward as its gradient comes back. Rank 1 runs forward, loss and backward per
    # micro-batch and sends the activation's gradient back. split_size = batch size is
    # naive model parallelism. The loss is the whole batch's mean, so the gradients
    # equal unpipelined ones. x and y are on `device`.
    # The order of sends and receives matters: nccl runs a rank's sends and receives
    # one after another, in the order they were called, and a send ends only when its
    # receive runs. So rank 1 posts every activation's receive before any gradient's
    # send: in the other order its first gradient's send would wait for rank 0's
    # receive, queued behind rank 0's next send, which waits for rank 1: a deadlock
    # that only nccl's buffering of small messages hides.
    rank, t0 = dist.get_rank(), time.perf_counter() if t0 is None else t0
    events: list[Event] = []
    pending, outs = [], []

    def timed(kind: str, i: int, fn: Callable[[], object]) -> object:
        sync(device)  # on a GPU: time the work itself, not its queueing
        start = time.perf_counter()
        result = fn()
        sync(device)
        events.append(Event(rank, kind, i, start - t0, time.perf_counter() - t0))
        return result

    if rank == 0:
        for i, xi in enumerate(x.split(split_size)):
            outs.append(timed("F", i, lambda xi=xi: stage(xi)))
            pending.append(dist.isend(outs[-1].detach(), dst=1))
        for i, out in enumerate(outs):
            grad = torch.empty_like(out)
            dist.recv(grad, src=1)
            timed("B", i, lambda out=out, grad=grad: out.backward(grad))
    else:
        acts = [torch.empty(len(yi), *cut_shape(x.shape[-1]), dtype=x.dtype,
                            device=device) for yi in y.split(split_size)]
        received = [dist.irecv(act, src=0) for act in acts]  # all posted first
        for i, (act, yi) in enumerate(zip(acts, y.split(split_size), strict=True)):
            received[i].wait()
            act.requires_grad_()
            out = timed("F", i, lambda act=act: stage(act))
            loss = F.cross_entropy(out, yi, reduction="sum") / len(y)
            timed("B", i, loss.backward)
            pending.append(dist.isend(act.grad, dst=0))
            outs.append(out.detach())
    for work in pending:
        work.wait()
    return events, (torch.cat(outs) if rank == 1 else None)


def checked_step(stage: nn.Module, x: torch.Tensor, y: torch.Tensor, split_size: int,
                 device: torch.device, path: Path) -> None:
    """Run one float64 step of a copy of `stage`; save its gradients and logits."""
    # float64: free of the rounding that float32 kernels (and TF32 on GPUs) differ in,
    # so the notebook can compare it with the unsplit model on any device
    stage64 = copy.deepcopy(stage).double()
    _, logits = pipeline_step(stage64, x.double(), y, split_size, device)
    torch.save({"grads": [p.grad.cpu() for p in stage64.parameters()],
                "logits": None if logits is None else logits.cpu()}, path)


def shared_clock() -> float:
    """Return rank 0's `time.perf_counter()`, sent to every rank: a common start."""
    t0 = [time.perf_counter()]  # perf_counter is one system-wide clock (Linux, macOS,
    dist.broadcast_object_list(t0, src=0)  # Windows), so both ranks can use rank 0's
    return t0[0]


def gather_events(events: list[Event]) -> list[Event]:
    """Return every rank's events, rank 0's first (all ranks must call it)."""
    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, list(events))
    return [event for rank_events in every for event in rank_events]


def seconds(step: Callable[[], object], device: torch.device, repeats: int,
            warmup: int = 1) -> list[float]:
    """Return the wall times of `repeats` calls of `step()` after `warmup` calls."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        step()
        sync(device)
        times.append(time.perf_counter() - start)
    return times
