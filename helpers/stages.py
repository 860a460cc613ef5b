"""A model cut into pipeline stages, in one process: build, split, compare, read.

The torchvision ResNet-14 that notebooks 10-12 split, the one-process model-parallel
and pipelined modules, and what the stage processes' timelines show (the scripts
share notebooks/scripts/stages.py instead: a copyable script imports no helpers).
Each docstring ends with the notebooks that use it.
Nothing here touches CUDA or picks a device at import time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING

import torch
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
    "idle_fraction",
    "make_resnet",
    "max_rel_diff",
    "overlap_time",
    "plot_timeline",
    "split_stages",
    "training_memory",
]

Event = tuple[int, str, int, float, float]
"""One bar of a timeline: (stage, "F" or "B", micro-batch, start s, end s)."""


def make_resnet(num_classes: int = 10, norm: str = "batch", seed: int = 0) -> ResNet:
    """Return a seeded, untrained ResNet-18 without layer4: a ResNet-14 (10, 11, 12)."""
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
    """Cut `make_resnet`'s model after layer1 in two stages of its modules (10, 12)."""
    m = model
    stage1 = nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool, m.layer1)
    stage2 = nn.Sequential(m.layer2, m.layer3, m.avgpool, nn.Flatten(1), m.fc)
    return stage1, stage2


def cut_shape(image: int) -> tuple[int, int, int]:
    """Return the per-image shape stage 1 hands to stage 2 (notebook 10)."""
    side = -(-image // 4)  # the stem halves the image twice (conv, then max-pool)
    return (64, side, side)


class TwoStageResNet(nn.Module):
    """Model parallel: stage 1 on `dev0`; stage 2 and the output on `dev1` (10, 11)."""

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
    """One process, two devices: micro-batch i+1 in stage 1 while i in stage 2 (11)."""

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


def bubble_fraction(stages: int, micro_batches: int) -> float:
    """Return the idle fraction (p-1)/(m+p-1) of a fill-drain schedule (notebook 11)."""
    if stages < 1 or micro_batches < 1:
        raise ValueError("need at least one stage and one micro-batch")
    return (stages - 1) / (micro_batches + stages - 1)


def idle_fraction(events: Sequence[Event]) -> float:
    """Return the idle share of stage time, first start to last end (10, 11)."""
    if not events:
        raise ValueError("no events")
    stages = {e[0] for e in events}
    span = max(e[4] for e in events) - min(e[3] for e in events)
    busy = sum(e[4] - e[3] for e in events)
    return 1.0 - busy / (len(stages) * span)


def overlap_time(events: Sequence[Event]) -> float:
    """Return the seconds during which stage 0 and stage 1 were both busy (10, 11)."""
    first = [e for e in events if e[0] == 0]
    second = [e for e in events if e[0] == 1]
    return sum(max(0.0, min(a[4], b[4]) - max(a[3], b[3]))
               for a in first for b in second)


def plot_timeline(timelines: Mapping[str, Sequence[Event]],
                  title: str = "") -> plt.Figure:
    """Draw a Gantt chart per timeline: a row per stage, a bar per F or B (10, 11)."""
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
    """Return the largest |got - ref|, each tensor scaled by its max |ref| (10-12)."""
    if len(got) != len(ref):
        raise ValueError(f"{len(got)} tensors vs {len(ref)} reference tensors")
    return max(((g.detach().cpu() - r.detach().cpu()).abs().max()
                / r.detach().abs().max().clamp_min(1e-30)).item()
               for g, r in zip(got, ref, strict=True))


def training_memory(num_params: int, bytes_per_param: int = 4,
                    optimizer_states: int = 2) -> dict[str, int]:
    """Return bytes of parameters, gradients, optimizer state; Adam keeps 2 (10, 12)."""
    params = num_params * bytes_per_param
    return {"params": params, "grads": params, "optimizer": optimizer_states * params,
            "total": (2 + optimizer_states) * params}
