"""The model, batches and byte counts that fsdp_train.py and its siblings share: a
seeded MLP of residual blocks, FSDP2's `shard`, and helpers that read DTensors (the
part a process stores, the full tensor, how a weight is split over the ranks).
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor

try:  # the public home since torch 2.6
    from torch.distributed.fsdp import fully_shard
except ImportError:  # older torch kept FSDP2 in a private module
    from torch.distributed._composable.fsdp import fully_shard

# the largest weight difference FSDP2 may show, in float64, against one process and
# DDP after the same steps: notebook 14 and tests/test_fsdp_script.py assert it
TOLERANCE = 1e-10


class Block(nn.Module):
    """A residual MLP block: x + W2 gelu(W1 x), the shape of a transformer's MLP."""

    def __init__(self, dim: int):
        super().__init__()
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


class Net(nn.Module):
    """`depth` blocks and a linear head with 8 classes (divisible by 1, 2, 4 ranks)."""

    def __init__(self, dim: int = 256, depth: int = 4, classes: int = 8):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build(args: argparse.Namespace, dtype: torch.dtype, device: torch.device,
          seed: int = 0) -> Net:
    """Return the seeded model: the same weights in every process."""
    torch.manual_seed(seed)
    return Net(args.dim, args.depth).to(device=device, dtype=dtype)


def shard(model: Net, mesh, **options) -> Net:  # NEW
    """Apply FSDP2: each block is one unit, then the root takes what is left."""
    for block in model.blocks:  # NEW: one all-gather per block, just in time
        fully_shard(block, mesh=mesh, **options)  # NEW
    fully_shard(model, mesh=mesh, **options)  # NEW: the head, and the root's duties
    return model


def batch(step: int, args: argparse.Namespace, dtype: torch.dtype,
          device: torch.device, rank: int, world: int):
    """Return this rank's slice of the global batch for `step` (seeded by step)."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(args.batch_size, args.dim, generator=g, dtype=dtype)
    y = torch.randint(0, 8, (args.batch_size,), generator=g)
    share = args.batch_size // world
    part = slice(rank * share, (rank + 1) * share)
    return x[part].to(device), y[part].to(device)


def local(t: torch.Tensor) -> torch.Tensor:
    """Return the part of `t` that this process stores (its shard, for a DTensor)."""
    return t.to_local() if isinstance(t, DTensor) else t


def nbytes(tensors) -> int:
    """Return the bytes this process stores for `tensors`."""
    return sum(local(t).numel() * local(t).element_size() for t in tensors)


def full_params(model: nn.Module) -> dict[str, torch.Tensor]:
    """Return every full parameter on the CPU; DTensor shards are all-gathered."""
    model = getattr(model, "module", model)  # DDP's wrapped model: the same names
    return {name: (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu()
            for name, p in model.named_parameters()}


def max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """Return the largest |a - b| over all parameters."""
    return max((v - b[k]).abs().max().item() for k, v in a.items())


def memory(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, int]:
    """Return this rank's bytes of parameters, gradients and optimizer state.

    DDP's all-reduce buckets are counted only when the gradients are views into
    them (gradient_as_bucket_view=True); by default they are a second copy.
    """
    params = list(model.parameters())
    state = [v for s in opt.state.values() for v in s.values()
             if isinstance(v, torch.Tensor)]
    return {"params": nbytes(params),
            "grads": nbytes(p.grad for p in params if p.grad is not None),
            "optimizer": nbytes(state)}


def describe(model: Net, rank: int, mesh) -> dict:
    """Print how the first block's weight is split: placements and local shapes."""
    w = model.blocks[0].up.weight
    shapes: list = [None] * mesh.size()
    dist.all_gather_object(shapes, tuple(w.to_local().shape), group=mesh.get_group())
    if rank == 0:
        print(f"blocks[0].up.weight: {type(w).__name__}, global shape "
              f"{tuple(w.shape)}, placements {w.placements}")
        print("  to_local().shape per rank: " + ", ".join(map(str, shapes)))
    return {"type": type(w).__name__, "placements": str(w.placements),
            "shape": list(w.shape), "local_shapes": [list(s) for s in shapes]}
