"""Tensor parallelism on the MLP blocks: `ColwiseParallel` splits `up`'s outputs,
`RowwiseParallel` splits `down`'s inputs and all-reduces the partial sums (Megatron-LM's
split). Checks the split model against the unsplit one in float64 and counts the
collectives with CommDebugMode. Called by fsdp_train.py with --tp.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from fsdp_model import Collectives, build
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

# the largest difference of outputs and gradients from the unsplit model, float64
# (notebook 14 and tests/test_fsdp_script.py)
TOLERANCE = 1e-12


def counts(mode: CommDebugMode) -> dict[str, int]:
    """Return {collective name: calls} from a CommDebugMode, names shortened."""
    return {str(op).split(".")[-1]: n for op, n in mode.get_comm_counts().items()}


def tensor_parallel(args, device: torch.device, rank: int, mesh, out: Path) -> None:
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
    with CommDebugMode() as fwd, Collectives() as sizes:
        got = tp(x)
    with CommDebugMode() as bwd:
        got.sum().backward()
    want = ref(x)
    want.sum().backward()
    grads = {n: p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
             for n, p in tp.named_parameters()}
    result = {
        "out_diff": (got - want).abs().max().item(),
        "grad_diff": max((grads[n] - p.grad).abs().max().item()
                         for n, p in ref.named_parameters()),
        "forward": counts(fwd), "backward": counts(bwd), "world": mesh.size(),
        "batch": args.batch_size, "dim": args.dim, "blocks": args.depth,
        "shapes": {n: [list(p.shape), list(p.to_local().shape)]
                   for n, p in tp.blocks[0].named_parameters()},
        # the elements each forward all-reduce summed, as it ran: one per block
        "forward_sizes": sizes.sizes("allreduce", unit=1),
        "forward_elements": max(sizes.sizes("allreduce", unit=1), default=0),
    }
    if rank == 0:
        (out / "tp.json").write_text(json.dumps(result, indent=1))
        print(f"tensor parallel, {mesh.size()} ranks: collectives forward "
              f"{result['forward']}, backward {result['backward']}; max |diff| "
              f"{max(result['out_diff'], result['grad_diff']):.1e} (float64)")
