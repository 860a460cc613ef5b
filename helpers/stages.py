"""Split a ResNet into two stages, pipeline micro-batches between them, draw timelines.

Used by notebooks 10 (model parallel) and 11 (pipeline parallel) and their scripts.
Nothing here touches CUDA or picks a device at import time.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torchvision.models import ResNet, resnet18

from helpers.plotting import FONT_SIZE, TITLE_SIZE, subplots

if TYPE_CHECKING:  # pyplot is imported only when a chart is drawn
    import matplotlib.pyplot as plt

__all__ = [
    "Event",
    "PipelinedResNet",
    "TwoStageResNet",
    "bubble_fraction",
    "cut_shape",
    "gather_events",
    "idle_fraction",
    "join_as_stage",
    "leave_group",
    "make_resnet",
    "max_rel_diff",
    "overlap_time",
    "pipeline_step",
    "plot_timeline",
    "shared_clock",
    "split_stages",
    "stage_parser",
    "training_memory",
]

Event = tuple[int, str, int, float, float]
"""One bar of a timeline: (stage, "F" or "B", micro-batch, start s, end s)."""


def make_resnet(num_classes: int = 10, norm: str = "batch", seed: int = 0) -> ResNet:
    """Return a seeded, untrained ResNet-18 without its last stage: a ResNet-14."""
    if norm not in ("batch", "group"):
        raise ValueError(f"norm must be 'batch' or 'group', got {norm!r}")
    torch.manual_seed(seed)
    layer = None if norm == "batch" else partial(nn.GroupNorm, 8)  # 8 groups
    model = resnet18(weights=None, num_classes=num_classes, norm_layer=layer)
    # layer4 holds 8.4 M of resnet18's 11.2 M parameters but sees only 1/32 of the
    # image's side (2x2 pixels of a 64x64 image): without it CPU runs are fast
    model.layer4 = nn.Identity()
    model.fc = nn.Linear(256, num_classes)
    return model


def split_stages(model: ResNet) -> tuple[nn.Sequential, nn.Sequential]:
    """Cut `make_resnet`'s model after layer1 into two stages sharing its modules."""
    m = model
    stage1 = nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool, m.layer1)
    stage2 = nn.Sequential(m.layer2, m.layer3, m.avgpool, nn.Flatten(1), m.fc)
    return stage1, stage2


def cut_shape(image: int) -> tuple[int, int, int]:
    """Return the per-image shape stage 1 hands to stage 2 for `image`-pixel inputs."""
    side = -(-image // 4)  # the stem halves the image twice (conv, then max-pool)
    return (64, side, side)


class TwoStageResNet(nn.Module):
    """Model parallel: stage 1 on `dev0`; stage 2, the output and the loss on `dev1`."""

    def __init__(self, model: ResNet, dev0: torch.device | str,
                 dev1: torch.device | str):
        super().__init__()
        self.dev0, self.dev1 = torch.device(dev0), torch.device(dev1)
        stage1, stage2 = split_stages(model)
        self.stage1, self.stage2 = stage1.to(self.dev0), stage2.to(self.dev1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run stage 1 on dev0, copy the activation to dev1, run stage 2 there."""
        act = self.stage1(x.to(self.dev0))
        return self.stage2(act.to(self.dev1))


class PipelinedResNet(TwoStageResNet):
    """One process, two devices: micro-batch i+1 runs stage 1 while i runs stage 2."""

    def __init__(self, model: ResNet, dev0: torch.device | str,
                 dev1: torch.device | str, split_size: int = 8):
        super().__init__(model, dev0, dev1)
        self.split_size = split_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Feed `split_size` micro-batches; async CUDA queues let the stages overlap."""
        chunks = iter(x.to(self.dev0).split(self.split_size))
        ready = self.stage1(next(chunks)).to(self.dev1)
        outs = []
        for chunk in chunks:
            outs.append(self.stage2(ready))  # queued on dev1 ...
            ready = self.stage1(chunk).to(self.dev1)  # ... while dev0 runs the next one
        outs.append(self.stage2(ready))
        return torch.cat(outs)


def pipeline_step(stage: nn.Module, rank: int, x: torch.Tensor, y: torch.Tensor,
                  split_size: int, act_shape: Sequence[int],
                  t0: float | None = None) -> tuple[list[Event], torch.Tensor | None]:
    """Run this rank's stage on one batch in micro-batches; return timeline, logits."""
    # Rank 0 runs every forward first, sending each activation to rank 1, then each
    # backward as its gradient comes back. Rank 1 runs forward, loss and backward per
    # micro-batch and sends the activation's gradient back. split_size = batch size is
    # naive model parallelism. The loss is the whole batch's mean, so the gradients
    # equal unpipelined ones. Needs torch.distributed initialised with two ranks.
    t0 = time.perf_counter() if t0 is None else t0  # event times are relative to t0
    events: list[Event] = []
    pending, outs = [], []

    def timed(kind: str, i: int, fn):
        start = time.perf_counter()
        result = fn()
        events.append((rank, kind, i, start - t0, time.perf_counter() - t0))
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
        for i, yi in enumerate(y.split(split_size)):
            act = torch.empty(len(yi), *act_shape)
            dist.recv(act, src=0)
            act.requires_grad_()
            out = timed("F", i, lambda act=act: stage(act))
            loss = F.cross_entropy(out, yi, reduction="sum") / len(y)
            timed("B", i, loss.backward)
            pending.append(dist.isend(act.grad, dst=0))
            outs.append(out.detach())
    for work in pending:
        work.wait()
    return events, (torch.cat(outs) if rank == 1 else None)


def stage_parser(description: str) -> argparse.ArgumentParser:
    """Return a parser with the options every two-stage script takes."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", required=True, help="folder for the results")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--image", type=int, default=64, help="image height and width")
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("OMP_NUM_THREADS", "1")),
                   help="torch threads per process")
    return p


def join_as_stage(args: argparse.Namespace, norm: str = "batch"
                  ) -> tuple[int, ResNet, nn.Sequential, torch.Tensor, torch.Tensor]:
    """Join the gloo group; return rank, model, this rank's stage, inputs, labels."""
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = make_resnet(norm=norm, seed=0)  # every rank builds the same weights ...
    stage = split_stages(model)[rank]  # ... and keeps only its own stage
    torch.manual_seed(1)
    x = torch.randn(args.batch, 3, args.image, args.image)  # synthetic images
    y = torch.randint(0, 10, (args.batch,))
    return rank, model, stage, x, y


def shared_clock() -> float:
    """Return rank 0's `time.perf_counter()`, sent to every rank: a common start."""
    t0 = [time.perf_counter()]  # perf_counter is one system-wide clock (Linux, macOS,
    dist.broadcast_object_list(t0, src=0)  # Windows), so both ranks can use rank 0's
    return t0[0]


def gather_events(events: Sequence[Event]) -> list[Event]:
    """Return every rank's events, rank 0's first (all ranks must call it)."""
    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, list(events))
    return [event for rank_events in every for event in rank_events]


def bubble_fraction(stages: int, micro_batches: int) -> float:
    """Return the idle fraction (p-1)/(m+p-1) of a fill-drain pipeline schedule."""
    if stages < 1 or micro_batches < 1:
        raise ValueError("need at least one stage and one micro-batch")
    return (stages - 1) / (micro_batches + stages - 1)


def idle_fraction(events: Sequence[Event]) -> float:
    """Return the idle share of stage time, from the first start to the last end."""
    if not events:
        raise ValueError("no events")
    stages = {e[0] for e in events}
    span = max(e[4] for e in events) - min(e[3] for e in events)
    busy = sum(e[4] - e[3] for e in events)
    return 1.0 - busy / (len(stages) * span)


def overlap_time(events: Sequence[Event]) -> float:
    """Return the seconds during which stage 0 and stage 1 were both busy."""
    first = [e for e in events if e[0] == 0]
    second = [e for e in events if e[0] == 1]
    return sum(max(0.0, min(a[4], b[4]) - max(a[3], b[3]))
               for a in first for b in second)


def plot_timeline(timelines: Mapping[str, Sequence[Event]],
                  title: str = "") -> plt.Figure:
    """Draw one Gantt chart per named timeline: a row per stage, a labelled bar each."""
    fig, axes = subplots(len(timelines), 1, sharex=True, squeeze=False)
    colors = {"F": "#4C72B0", "B": "#DD8452"}
    for ax, (name, events) in zip(axes[:, 0], timelines.items(), strict=True):
        first = min(e[3] for e in events)
        span = max(e[4] for e in events) - first
        for stage, kind, i, start, end in events:
            left, width = (start - first) * 1e3, (end - start) * 1e3
            ax.barh(stage, width, left=left, height=0.5, color=colors[kind],
                    edgecolor="white")
            label = f"{kind}{i}"
            if end - start > 0.012 * len(label) * span:  # room inside the bar
                ax.text(left + width / 2, stage, label, ha="center", va="center",
                        fontsize=FONT_SIZE, color="white")
            else:  # a short bar: its label goes just above it
                ax.text(left + width / 2, stage - 0.27, label, ha="center",
                        va="bottom", fontsize=FONT_SIZE, color=colors[kind])
        stages = sorted({e[0] for e in events})
        ax.set_yticks(stages, [f"stage {s + 1}" for s in stages], fontsize=FONT_SIZE)
        ax.set_ylim(max(stages) + 0.45, min(stages) - 0.85)
        ax.tick_params(axis="x", labelsize=FONT_SIZE)
        ax.set_title(f"{name}: {span * 1e3:.0f} ms, idle {idle_fraction(events):.0%}",
                     fontsize=FONT_SIZE + 1)
    axes[-1, 0].set_xlabel("time (ms); blue = forward (F), orange = backward (B)",
                           fontsize=FONT_SIZE)
    if title:
        fig.suptitle(title, fontsize=TITLE_SIZE)
    fig.tight_layout()
    return fig


def max_rel_diff(got: Sequence[torch.Tensor], ref: Sequence[torch.Tensor]) -> float:
    """Return the largest |got - ref| over all tensors, each scaled by its max |ref|."""
    if len(got) != len(ref):
        raise ValueError(f"{len(got)} tensors vs {len(ref)} reference tensors")
    return max(((g.detach().cpu() - r.detach().cpu()).abs().max()
                / r.detach().abs().max().clamp_min(1e-30)).item()
               for g, r in zip(got, ref, strict=True))


def training_memory(num_params: int, bytes_per_param: int = 4,
                    optimizer_states: int = 2) -> dict[str, int]:
    """Return bytes for parameters, gradients and optimizer state (Adam keeps 2)."""
    params = num_params * bytes_per_param
    return {"params": params, "grads": params, "optimizer": optimizer_states * params,
            "total": (2 + optimizer_states) * params}


def leave_group() -> None:
    """Wait for every rank, leave the group, then let gloo's threads finish."""
    dist.barrier()  # nobody leaves while another rank still communicates
    dist.destroy_process_group()
    # Workaround, not part of the pattern: gloo frees the last collectives' tensors on
    # its own threads; if Python is already shutting down, the process aborts
    # ("terminate called without an active exception"). A short pause avoids it.
    time.sleep(0.2)
