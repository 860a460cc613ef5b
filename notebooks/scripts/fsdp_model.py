"""The model, batches and byte counts that fsdp_train.py and its siblings share: a
seeded MLP of residual blocks, FSDP2's `shard`, helpers that read DTensors (the
part a process stores, the full tensor, how a weight is split over the ranks), and
`Collectives`, which records the size of each collective as it runs.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

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


class Collectives(TorchDispatchMode):
    """Record each collective run inside it as (name, elements, bytes) of its largest
    tensor: the gathered output of an all-gather, the summed tensor of an all-reduce.
    It sees the tensors that travel, not what the model holds; DTensor's too."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(issubclass(t, DTensor) for t in types):  # let DTensor run its ops:
            return NotImplemented  # the collectives they need come back here
        out = func(*args, **(kwargs or {}))
        name = func.__name__.split(".")[0].strip("_")  # e.g. allgather_base, all_reduce
        if (func.namespace in ("c10d", "_c10d_functional") and "wait" not in name
                and any(w in name for w in ("all", "reduce", "scatter"))):
            big = max((t for t in tree_leaves((args, out))
                       if isinstance(t, torch.Tensor)), key=torch.Tensor.numel)
            self.calls.append((name, big.numel(), big.numel() * big.element_size()))
        return out

    def sizes(self, kind: str, unit: int = 2) -> list[int]:
        """Return the elements (unit=1) or bytes (unit=2) of each call named `kind`."""
        return [call[unit] for call in self.calls if kind in call[0].replace("_", "")]


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
