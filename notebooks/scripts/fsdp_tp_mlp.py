"""Tensor parallelism on the MLP blocks (notebook 14, §6): `ColwiseParallel` splits
`up`'s outputs, `RowwiseParallel` splits `down`'s inputs and all-reduces the partial
sums (Megatron-LM's split).

    torchrun --standalone --nproc-per-node=2 fsdp_tp_mlp.py --out build/fsdp

Checks the split model against the unsplit one in float64, counts the collectives
with PyTorch's CommDebugMode (common.Traffic adds their sizes) and writes a `Split`
record to OUT/tp.json. Notebook 14 runs it through fsdp_lessons.py. It imports
fsdp_model.py and common.py: copy the folder, not this file.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from pathlib import Path

import torch
import torch.distributed as dist
from common import Traffic, leave, log, save_record
from fsdp_model import add_model_args, build, join
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

# the largest difference of outputs and gradients from the unsplit model, float64
# (notebook 14 and tests/test_fsdp_script.py)
TOLERANCE = 1e-12


@dataclasses.dataclass
class Split:
    """The split blocks against the unsplit ones, and what they sent."""

    world: int
    batch: int
    dim: int
    blocks: int
    out_diff: float  # max |diff| of the outputs, float64
    grad_diff: float  # max |diff| of the gradients, float64
    forward: dict[str, int]  # collective: calls, in forward
    backward: dict[str, int]  # the same in backward
    shapes: dict[str, list[list[int]]]  # blocks[0]'s parameters: full, this rank's
    forward_sizes: list[int]  # the elements each forward all-reduce summed, as it ran
    forward_elements: int  # the largest of them


def tensor_parallel(args, device: torch.device, mesh) -> Split:
    """Split each block's two layers over the ranks; compare with the unsplit model."""
    ref = build(args, torch.float64, device, seed=2)  # the same on every rank
    tp = copy.deepcopy(ref)
    for block in tp.blocks:  # NEW: Megatron's split of a transformer MLP
        parallelize_module(block, mesh, {
            "up": ColwiseParallel(),  # NEW: rows (outputs) split: no communication
            "down": RowwiseParallel(),  # NEW: columns (inputs) split: sum partials
        })
    g = torch.Generator().manual_seed(2)
    x = torch.randn(args.batch_size, args.dim, generator=g, dtype=torch.float64)
    x = x.to(device).requires_grad_()  # as if an earlier layer made it
    with Traffic() as fwd:
        got = tp(x)
    with Traffic() as bwd:
        got.sum().backward()
    want = ref(x)
    want.sum().backward()
    grads = {n: p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
             for n, p in tp.named_parameters()}
    sizes = [n for kind, n, _ in fwd.sizes if "reduce" in kind]
    return Split(
        world=mesh.size(), batch=args.batch_size, dim=args.dim, blocks=args.depth,
        out_diff=(got - want).abs().max().item(),
        grad_diff=max((grads[n] - p.grad).abs().max().item()
                      for n, p in ref.named_parameters()),
        forward=fwd.calls, backward=bwd.calls,
        shapes={n: [list(p.shape), list(p.to_local().shape)]
                for n, p in tp.blocks[0].named_parameters()},
        forward_sizes=sizes, forward_elements=max(sizes, default=0))


def run(args: argparse.Namespace, device: torch.device, mesh) -> Split:
    """Run the comparison on the mesh's ranks; rank 0 writes the record."""
    result = tensor_parallel(args, device, mesh)
    if dist.get_rank() == 0:
        save_record(Path(args.out) / "tp.json", result)
    log(f"tensor parallel, {mesh.size()} ranks: collectives forward "
        f"{result.forward}, backward {result.backward}; max |diff| "
        f"{max(result.out_diff, result.grad_diff):.1e} (float64)")
    return result


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main(argv: list[str] | None = None) -> None:
    args = add_model_args(argparse.ArgumentParser(
        description=__doc__.split("\n")[0])).parse_args(argv)
    device, mesh = join(args)
    run(args, device, mesh)
    leave()


if __name__ == "__main__":
    main()
