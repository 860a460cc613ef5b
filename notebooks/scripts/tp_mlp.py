"""Tensor parallelism: split the course MLP's layers across ranks; start with torchrun.

    torchrun --nproc-per-node=2 tp_mlp.py --out build/tp

`layer1` is split by output features (ColwiseParallel: each rank computes half of
the hidden units) and `layer2` by input features (RowwiseParallel: each rank
multiplies its half and the partial sums are all-reduced); `layer3` stays whole.
Rank 0 checks the output and the gradients against the unsplit MLP (float64), counts
the collectives of one forward and one backward, and writes OUT/tp.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

from helpers.models import MLP


def counts(mode: CommDebugMode) -> dict[str, int]:
    """Return {collective name: calls} from a CommDebugMode, names shortened."""
    return {str(op).split(".")[-1]: n for op, n in mode.get_comm_counts().items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    ref = MLP(in_dim=10, h1=16, h2=32, out_dim=1).double()  # the same on every rank
    tp = parallelize_module(copy.deepcopy(ref), mesh, {
        "layer1": ColwiseParallel(),  # weight rows (outputs) split: no communication
        "layer2": RowwiseParallel(),  # weight columns (inputs) split: sum partials
    })
    x = torch.randn(args.batch, 10, dtype=torch.float64)  # replicated input
    x.requires_grad_()  # as if an earlier layer made it: its gradient flows back
    with CommDebugMode() as fwd:
        out = tp(x)
    with CommDebugMode() as bwd:
        out.sum().backward()
    want = ref(x)
    want.sum().backward()
    grads = {n: p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
             for n, p in tp.named_parameters()}
    result = {
        "out_diff": (out - want).abs().max().item(),
        "grad_diff": max((grads[n] - p.grad).abs().max().item()
                         for n, p in ref.named_parameters()),
        "forward": counts(fwd), "backward": counts(bwd),
        "shapes": {n: [list(p.shape), list(p.to_local().shape)]
                   for n, p in tp.named_parameters() if isinstance(p, DTensor)},
        # what the all-reduces sum: layer2's partial outputs, then x's gradient
        "forward_elements": out.shape[0] * 32, "backward_elements": x.numel(),
    }
    if rank == 0:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "tp.json").write_text(json.dumps(result, indent=1))
        for name, (full, mine) in result["shapes"].items():
            print(f"{name:14s} full {full}, on each rank {mine}")
        print(f"collectives: forward {result['forward']}, "
              f"backward {result['backward']}")
    dist.barrier()
    dist.destroy_process_group()
    time.sleep(0.2)  # let gloo's threads free their last tensors before exit


if __name__ == "__main__":
    main()
