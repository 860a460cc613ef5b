"""The sharding family's shared file (notebook 14): a seeded MLP of residual blocks,
FSDP2's `shard`, this rank's batch, a trainer, and readers of what a rank holds.

fsdp_train.py, fsdp_variants.py, fsdp_checkpoint.py and fsdp_tp_mlp.py import it, and
common.py; copy the whole folder, not one file.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from common import Traffic, clock, nbytes, setup
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

# the largest weight difference FSDP2 may show, in float64, against one process and
# DDP after the same steps: notebook 14 and tests/test_fsdp_script.py assert it
TOLERANCE = 1e-10


class ResidualBlock(nn.Module):
    """A residual MLP block: x + W2 gelu(W1 x), the shape of a transformer's MLP."""

    def __init__(self, dim: int):
        super().__init__()
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


class ResidualMLP(nn.Module):
    """`depth` blocks and a linear head with 8 classes (divisible by 1, 2, 4 ranks)."""

    def __init__(self, dim: int = 256, depth: int = 4, classes: int = 8):
        super().__init__()
        self.blocks = nn.ModuleList(ResidualBlock(dim) for _ in range(depth))
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def add_model_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the options every lesson of this family reads: model, batch, device."""
    p.add_argument("--out", required=True, help="folder for the results")
    p.add_argument("--dim", type=int, default=256, help="width of the blocks")
    p.add_argument("--depth", type=int, default=4, help="number of blocks")
    p.add_argument("--batch-size", type=int, default=32,
                   help="global batch size, split evenly over the processes")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--steps", type=int, default=3, help="steps before the timed ones")
    p.add_argument("--timed", type=int, default=5, help="timed steps of each model")
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("OMP_NUM_THREADS", "1")),
                   help="CPU threads per process")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                   help="auto: one GPU per process if there are enough, else CPU")
    return p


def join(args: argparse.Namespace) -> tuple[torch.device, DeviceMesh]:
    """Join the process group (common.setup); return the device and a 1-D mesh."""
    torch.set_num_threads(args.threads)
    device = setup(args.device)
    if args.batch_size % dist.get_world_size():
        raise SystemExit(f"--batch-size {args.batch_size} must divide by the "
                         f"{dist.get_world_size()} ranks")
    return device, init_device_mesh(device.type, (dist.get_world_size(),))  # NEW


def build(args: argparse.Namespace, dtype: torch.dtype, device: torch.device,
          seed: int = 0) -> ResidualMLP:
    """Return the seeded model: the same weights in every process."""
    torch.manual_seed(seed)
    return ResidualMLP(args.dim, args.depth).to(device=device, dtype=dtype)


def shard(model: ResidualMLP, mesh, **options) -> ResidualMLP:  # NEW
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


class Trainer:
    """One model and its Adam optimizer, stepping on this rank's batches."""

    def __init__(self, model: nn.Module, args, dtype, device, rank, world):
        self.model, self.args, self.dtype, self.device = model, args, dtype, device
        self.rank, self.world, self.steps, self.times = rank, world, 0, []
        self.opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        self.held_after_forward = 0  # bytes of full (unsharded) weights kept
        self.gathered_forward = 0  # bytes the first forward's all-gathers returned

    def step(self, timed: bool = False) -> None:
        """Run forward, backward and the optimizer on the next batch."""
        x, y = batch(self.steps, self.args, self.dtype, self.device, self.rank,
                     self.world)
        self.opt.zero_grad(set_to_none=True)
        t0 = clock(self.device)
        if self.steps == 0:  # the same every step; measured once, never timed
            with Traffic() as seen:  # the tensors the all-gathers returned
                out = self.model(x)
            self.gathered_forward = sum(b for kind, b in seen.bytes.items()
                                        if "gather" in kind)
            self.held_after_forward = nbytes(  # plain tensors are unsharded weights
                [p for p in self.model.parameters() if not isinstance(p, DTensor)])
        else:
            out = self.model(x)
        nn.functional.cross_entropy(out.float(), y).backward()  # FSDP reduce-scatters
        self.opt.step()  # FSDP: Adam updates only this rank's shard
        if timed:
            self.times.append(clock(self.device) - t0)
        self.steps += 1


def race(trainers: dict[str, Trainer], steps: int, timed: int, group) -> None:
    """Step the models in turn, `steps` then `timed` timed: load hits them alike."""
    for i in range(steps + timed):
        for trainer in trainers.values():
            dist.barrier(group)  # every rank starts each step together
            trainer.step(timed=i >= steps)


def alone(args, dtype: torch.dtype, device: torch.device, steps: int) -> Trainer:
    """Train the reference: one process, the whole batch, the same steps."""
    single = Trainer(build(args, dtype, device), args, dtype, device, 0, 1)
    for _ in range(steps):
        single.step()
    return single


def memory(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, int]:
    """Return this rank's bytes of parameters, gradients and optimizer state.

    DDP's all-reduce buckets are counted only when the gradients are views into
    them (gradient_as_bucket_view=True); by default they are a second copy.
    """
    params = list(model.parameters())
    state = [v for s in opt.state.values() for v in s.values()
             if isinstance(v, torch.Tensor)]
    return {"params": nbytes(params),
            "grads": nbytes([p.grad for p in params if p.grad is not None]),
            "optimizer": nbytes(state)}


def describe(model: ResidualMLP, rank: int, mesh) -> dict:
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
