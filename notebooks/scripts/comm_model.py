"""What the comm_ scripts share: their options, the MLP that DDP trains, its batches.

An MLP of --layers square Linear layers (each 256 KiB of float32 gradients, plus its
bias, at the default width 256) in DDP, trained by SGD on synthetic batches. Copy the
whole folder, not this file: it is imported by comm_buckets.py, comm_overlap.py,
comm_compress.py, comm_join.py and comm_lessons.py.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

KIB = 1024


def parse_args(doc: str, argv: list[str] | None = None) -> argparse.Namespace:
    """Read the family's options (each script uses those it needs)."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--out", default="build/comm", help="folder for the results")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    p.add_argument("--profile-batch", type=int, default=512,
                   help="samples per rank in the profiled steps")
    p.add_argument("--caps", default="0.25,1,25", help="bucket_cap_mb values (MiB)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=2, help="timed steps per cap and round")
    p.add_argument("--timeout", type=float, default=3.0,
                   help="seconds before the uneven run without Join gives up")
    p.add_argument("--max-kib", type=int, default=64 * KIB,
                   help="the largest all-reduce of the bandwidth sweep, in KiB")
    p.add_argument("--ring-numel", type=int, default=2**20,
                   help="float32 elements of the ring all-reduce check (any number)")
    args = p.parse_args(argv)
    if args.max_kib < 1:
        p.error(f"--max-kib {args.max_kib}: the sweep starts at 1 KiB")
    return args


def make_model(layers: int, width: int, seed: int = 0) -> nn.Sequential:
    """Return `layers` Linear(width, width) layers with ReLUs between them."""
    torch.manual_seed(seed)
    mods: list[nn.Module] = []
    for i in range(layers):
        mods += [nn.Linear(width, width)] + ([nn.ReLU()] if i < layers - 1 else [])
    return nn.Sequential(*mods)


def wrap(model: nn.Module, device: torch.device, cap: float, group=None) -> DDP:
    """Return `model` on `device` in DDP; a bucket closes once it reaches `cap` MiB."""
    return DDP(model.to(device), bucket_cap_mb=cap, process_group=group,
               device_ids=[device.index] if device.type == "cuda" else None)


def batch(width: int, size: int, step: int, device: torch.device):
    """Return this rank's synthetic (input, target) for `step`."""
    g = torch.Generator().manual_seed(1000 * step + dist.get_rank())
    x = torch.randn(size, width, generator=g)
    return x.to(device), x.flip(1).to(device)  # learn to reverse the features


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x, y) -> float:
    """Run one SGD step on (x, y); return the loss."""
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()
